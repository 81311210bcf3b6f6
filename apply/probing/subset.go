package probing

import "math"

// Subset reports whether live holds every field and value of desired. Maps are compared as
// subsets (a desired null or empty map/list matches an absent key), lists element by element
// with equal length, numbers by value. FieldsEqual compares two fields as subsets of each
// other; package apply holds a desired object to the live one by the same rules (satisfied,
// drift, ignored fields), so that there is one copy of them.
func Subset(desired, live any) bool {
	switch d := desired.(type) {
	case nil:
		return live == nil
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return len(d) == 0 && live == nil
		}
		for k, dv := range d {
			lv, ok := l[k]
			if !ok {
				if Empty(dv) {
					continue
				}
				return false
			}
			if !Subset(dv, lv) {
				return false
			}
		}
		return true
	case []any:
		l, ok := live.([]any)
		if !ok {
			return len(d) == 0 && live == nil
		}
		if len(d) != len(l) {
			return false
		}
		for i := range d {
			if !Subset(d[i], l[i]) {
				return false
			}
		}
		return true
	default:
		if di, ok := desired.(int64); ok {
			if li, ok := live.(int64); ok {
				return di == li // exact, beyond float64's 53 bits
			}
		}
		if dn, ok := number(desired); ok {
			ln, ok := number(live)
			return ok && dn == ln
		}
		return desired == live
	}
}

// Empty reports values whose absence in the live object means the same as their presence: a
// null, an empty map, an empty list.
func Empty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(v) == 0
	case []any:
		return len(v) == 0
	}
	return false
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case float64:
		return n, !math.IsNaN(n)
	case float32:
		return float64(n), true
	}
	return 0, false
}
