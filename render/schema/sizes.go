package schema

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
)

const (
	// maxObjectBytes is the largest object checked as storable: etcd refuses a request over
	// its --max-request-bytes, 1.5 MiB by default, and the API server stores each object in
	// one. The API server's own request body limit (3 MiB) is higher, so this is the one an
	// object meets first. Measured as JSON, the encoding of custom resources; built-in kinds
	// are stored as protobuf, a little smaller, so an object near the limit may still fit.
	maxObjectBytes = 3 << 19
	// maxDataBytes is the API server's limit on a ConfigMap's or Secret's data
	// (core.MaxSecretSize, 1 MiB).
	maxDataBytes = 1 << 20
)

// checkObjectSize reports an object too large to be stored.
func checkObjectSize(obj *unstructured.Unstructured) []Problem {
	b, err := json.Marshal(obj.Object)
	if err != nil {
		return []Problem{{Detail: fmt.Sprintf("cannot be encoded as JSON: %v", err)}}
	}
	if len(b) <= maxObjectBytes {
		return nil
	}
	return []Problem{{Detail: fmt.Sprintf("the object is %d bytes as JSON, over the %d bytes (1.5 MiB) etcd stores in one object: "+
		"split it, or keep large data out of the package", len(b), maxObjectBytes)}}
}

// dataFields are the maps of the kinds that hold data, and whether each holds base64.
var dataFields = map[schema.GroupKind][]struct {
	name   string
	base64 bool
}{
	{Kind: "ConfigMap"}: {{"data", false}, {"binaryData", true}},
	{Kind: "Secret"}:    {{"data", true}, {"stringData", false}},
}

// checkData checks a ConfigMap's or Secret's data as the API server does: every key a valid
// key, base64 values that decode, and at most 1 MiB in all (for a ConfigMap keys count too).
func checkData(obj *unstructured.Unstructured) []Problem {
	gk := obj.GroupVersionKind().GroupKind()
	fields, ok := dataFields[gk]
	if !ok {
		return nil
	}
	var problems []Problem
	total := 0
	for _, f := range fields {
		m, _ := obj.Object[f.name].(map[string]any)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			field := f.name + "." + k
			for _, msg := range validation.IsConfigMapKey(k) {
				problems = append(problems, Problem{Field: field, Detail: fmt.Sprintf("%q is not a valid key: %s", k, msg)})
			}
			s, ok := m[k].(string)
			if !ok {
				continue // the typed check reports it
			}
			size := len(s)
			if f.base64 {
				b, err := base64.StdEncoding.DecodeString(s)
				if err != nil {
					problems = append(problems, Problem{Field: field, Detail: fmt.Sprintf("not base64 (%v): encode the value, or put it in %s", err, textField(gk))})
					continue
				}
				size = len(b)
			}
			if gk.Kind == "ConfigMap" {
				size += len(k)
			}
			total += size
		}
	}
	if total > maxDataBytes {
		problems = append(problems, Problem{Field: fields[0].name, Detail: fmt.Sprintf(
			"%d bytes in all, over the %d bytes (1 MiB) the API server takes in a %s: split it, or keep large data out of the package", total, maxDataBytes, gk.Kind)})
	}
	return problems
}

// textField is the field of kind gk that holds values as they are.
func textField(gk schema.GroupKind) string {
	if gk.Kind == "Secret" {
		return "stringData"
	}
	return "data"
}
