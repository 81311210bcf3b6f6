package rollout

import (
	"slices"
	"strings"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// PartitionOrder orders the partitions present: static values first in the order given ("*"
// standing for every value not listed), then, alphanumerically, values the static list does
// not cover, and clusters without the label ("") last.
func PartitionOrder(present []string, p *v1alpha1.FleetPartitions) []string {
	values := slices.Clone(present)
	slices.SortFunc(values, compareAlphanumeric)
	values = slices.Compact(values)
	unlabelled := slices.Contains(values, "")
	values = slices.DeleteFunc(values, func(s string) bool { return s == "" })
	var out []string
	if p != nil && p.Order != nil && len(p.Order.Static) > 0 {
		listed := map[string]bool{}
		for _, s := range p.Order.Static {
			listed[s] = true
		}
		var rest []string
		for _, v := range values {
			if !listed[v] {
				rest = append(rest, v)
			}
		}
		star := false
		for _, s := range p.Order.Static {
			switch {
			case s == "*":
				out = append(out, rest...)
				star = true
			case slices.Contains(values, s):
				out = append(out, s)
			}
		}
		if !star {
			out = append(out, rest...)
		}
	} else {
		out = values
	}
	if unlabelled {
		out = append(out, "")
	}
	return out
}

// compareAlphanumeric compares strings with runs of digits compared by value: "2" < "10".
func compareAlphanumeric(a, b string) int {
	for a != "" && b != "" {
		da, db := digitPrefix(a), digitPrefix(b)
		if da != "" && db != "" {
			na, nb := strings.TrimLeft(da, "0"), strings.TrimLeft(db, "0")
			if c := len(na) - len(nb); c != 0 {
				return c
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
			a, b = a[len(da):], b[len(db):]
			continue
		}
		if a[0] != b[0] {
			return int(a[0]) - int(b[0])
		}
		a, b = a[1:], b[1:]
	}
	return len(a) - len(b)
}

func digitPrefix(s string) string {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i]
}
