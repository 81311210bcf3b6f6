package apply

import (
	"encoding/base64"
	"math"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// satisfied reports whether the live object already holds every field and value of the desired
// object, so that applying it again would change nothing pkgsync cares about. It is the check
// that lets an unchanged reconcile skip the write: no library compares a desired manifest with a
// live object this way (kubectl diff and Flux use a dry-run request, one more call per object).
//
// Maps are compared as subsets (the API server adds defaults and other managers' fields), lists
// element by element with equal length, numbers by value, and a desired null or empty map/list
// matches an absent field. docs/apply-design.md lists the limits.
func satisfied(desired, live *unstructured.Unstructured) bool {
	d := desired.Object
	if desired.GetKind() == "Secret" && desired.GroupVersionKind().Group == "" {
		d = secretWithoutStringData(d)
	}
	return subset(d, live.Object)
}

func subset(desired, live any) bool {
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
				if empty(dv) {
					continue
				}
				return false
			}
			if !subset(dv, lv) {
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
			if !subset(d[i], l[i]) {
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

// empty reports values whose absence in the live object means the same as their presence.
func empty(v any) bool {
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

// secretWithoutStringData folds stringData into data the way the API server does on write, since
// live Secrets never show stringData.
func secretWithoutStringData(obj map[string]any) map[string]any {
	sd, ok := obj["stringData"].(map[string]any)
	if !ok {
		return obj
	}
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		if k != "stringData" {
			out[k] = v
		}
	}
	data := map[string]any{}
	if d, ok := obj["data"].(map[string]any); ok {
		for k, v := range d {
			data[k] = v
		}
	}
	for k, v := range sd {
		if s, ok := v.(string); ok {
			data[k] = base64.StdEncoding.EncodeToString([]byte(s))
		}
	}
	out["data"] = data
	return out
}
