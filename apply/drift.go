package apply

import (
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply/probing"
)

// MaxDriftPaths bounds the fields reported per drifted object; Drift.More counts the rest.
const MaxDriftPaths = 10

// Drift is an object whose live state no longer matches what pkgsync applied, while its desired
// state did not change.
type Drift struct {
	Ref ObjectRef
	// Paths are the fields that differ, as JSON pointers, in the order of the desired object's
	// sorted keys (at most MaxDriftPaths); More counts the others.
	Paths []string
	More  int
	// Corrected says the object was applied again (v1alpha1.DriftCorrect); otherwise it was left
	// as it is (v1alpha1.DriftReport).
	Corrected bool
}

// drift tells whether a live object that does not satisfy the desired one drifted: someone
// changed it after pkgsync applied this very desired state, as opposed to a new desired state
// (a new revision or configuration) that pkgsync has not applied yet. The desired-hash
// annotation tells them apart, at no extra cost: the live object carries the hash of what
// pkgsync last applied. An object without the annotation (applied by an older pkgsync, or not by
// pkgsync) is treated as a new desired state.
func drift(desired, live *unstructured.Unstructured, policy v1alpha1.DriftPolicy) *Drift {
	hash := desiredHashOf(desired)
	if hash == "" || desiredHashOf(live) != hash {
		return nil
	}
	d := &Drift{Ref: RefOf(desired), Corrected: policy != v1alpha1.DriftReport}
	var paths []string
	want := desired.Object
	if desired.GetKind() == "Secret" && desired.GroupVersionKind().Group == "" {
		want = secretWithoutStringData(want)
	}
	diffPaths("", want, live.Object, &paths)
	if len(paths) > MaxDriftPaths {
		d.More = len(paths) - MaxDriftPaths
		paths = paths[:MaxDriftPaths]
	}
	d.Paths = paths
	return d
}

// diffPaths appends the JSON pointers of the fields where desired is not a subset of live, by
// the rules of satisfied: maps as subsets, lists of equal length element by element, a list of
// another length as a whole. Only paths are reported, never values (Secrets drift too).
func diffPaths(prefix string, desired, live any, out *[]string) {
	switch d := desired.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			if !probing.Subset(desired, live) {
				*out = append(*out, pointerOrRoot(prefix))
			}
			return
		}
		keys := make([]string, 0, len(d))
		for k := range d {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			lv, ok := l[k]
			if !ok {
				if !probing.Empty(d[k]) {
					*out = append(*out, prefix+"/"+escapePointer(k))
				}
				continue
			}
			diffPaths(prefix+"/"+escapePointer(k), d[k], lv, out)
		}
	case []any:
		l, ok := live.([]any)
		if !ok || len(l) != len(d) {
			if !probing.Subset(desired, live) {
				*out = append(*out, pointerOrRoot(prefix))
			}
			return
		}
		for i := range d {
			diffPaths(prefix+"/"+strconv.Itoa(i), d[i], l[i], out)
		}
	default:
		if !probing.Subset(desired, live) {
			*out = append(*out, pointerOrRoot(prefix))
		}
	}
}

func pointerOrRoot(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

// escapePointer escapes a key as an RFC 6901 reference token.
func escapePointer(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

// noteDrift adds a drifted object to the result.
func (r *Result) noteDrift(d *Drift) {
	if d != nil {
		r.Drift = append(r.Drift, *d)
	}
}
