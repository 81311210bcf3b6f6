package apply

import (
	"encoding/base64"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"pkgsync.dev/pkgsync/apply/probing"
)

// satisfied reports whether the live object already holds every field and value of the desired
// object, so that applying it again would change nothing pkgsync cares about. It is the check
// that lets an unchanged reconcile skip the write: no library compares a desired manifest with a
// live object this way (kubectl diff and Flux use a dry-run request, one more call per object).
//
// Maps are compared as subsets (the API server adds defaults and other managers' fields), lists
// element by element with equal length, numbers by value, and a desired null or empty map/list
// matches an absent field (probing.Subset). docs/apply-design.md lists the limits.
func satisfied(desired, live *unstructured.Unstructured) bool {
	d := desired.Object
	if desired.GetKind() == "Secret" && desired.GroupVersionKind().Group == "" {
		d = secretWithoutStringData(d)
	}
	return probing.Subset(d, live.Object)
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
