package schema

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
)

// checkKnownKind tells whether client-go's scheme has gvk, whose group it knows, as an object
// kind (one with metadata, not a list or options); when not, the problem names what it has.
func checkKnownKind(gvk schema.GroupVersionKind) *Problem {
	gv := gvk.GroupVersion()
	if !scheme.Scheme.IsVersionRegistered(gv) {
		var versions []string
		for _, v := range scheme.Scheme.PrioritizedVersionsForGroup(gvk.Group) {
			if slices.Contains(objectKinds(v), gvk.Kind) {
				versions = append(versions, v.String())
			}
		}
		detail := fmt.Sprintf("%s is not an API version of Kubernetes %s", gv, kubernetesVersion)
		if len(versions) > 0 {
			detail += fmt.Sprintf("; %s is served as %s", gvk.Kind, strings.Join(versions, ", "))
		}
		return &Problem{Field: "apiVersion", Detail: detail}
	}
	kinds := objectKinds(gv)
	if slices.Contains(kinds, gvk.Kind) {
		return nil
	}
	detail := fmt.Sprintf("%s is not a kind of %s", gvk.Kind, gv)
	if s := Nearest(gvk.Kind, kinds); s != "" {
		detail += fmt.Sprintf("; did you mean %s?", s)
	}
	return &Problem{Field: "kind", Detail: detail}
}

// objectKinds lists the kinds of gv that are objects: those with metadata.
func objectKinds(gv schema.GroupVersion) []string {
	var kinds []string
	for kind, t := range scheme.Scheme.KnownTypes(gv) {
		if _, ok := t.FieldByName("ObjectMeta"); ok {
			kinds = append(kinds, kind)
		}
	}
	slices.Sort(kinds)
	return kinds
}

// Nearest returns the name among names closest to s, when it is close enough to be what was
// meant: the same but for case, or at most a third of its letters (at least two) away. It is
// the one "did you mean" rule of pkgsync's checks (kinds, fields, enums, configuration keys).
// Hand-written: no library in the module graph offers an edit distance.
func Nearest(s string, names []string) string {
	best, bestDist := "", -1
	for _, n := range names {
		if strings.EqualFold(n, s) {
			return n
		}
		d := distance(strings.ToLower(s), strings.ToLower(n))
		if bestDist < 0 || d < bestDist {
			best, bestDist = n, d
		}
	}
	if bestDist < 0 || bestDist > max(2, len(s)/3) {
		return ""
	}
	return best
}

// distance is the Levenshtein distance of a and b, in bytes: names are ASCII.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
