package v1alpha1

import (
	"errors"
	"fmt"
	"strings"
)

// DriftPolicy says what a reconcile does with an applied object whose live state no longer
// matches what pkgsync applied.
// +kubebuilder:validation:Enum=Correct;Report
type DriftPolicy string

const (
	// DriftCorrect applies the object again, which restores the fields pkgsync sets (the default).
	DriftCorrect DriftPolicy = "Correct"
	// DriftReport leaves the object as it is and reports the changed fields in
	// status.drift and the Drifted condition. A new revision (image digest or configuration)
	// is still applied.
	DriftReport DriftPolicy = "Report"
)

const (
	// DriftedCondition is True while a resource with spec.driftPolicy Report has objects whose
	// live state differs from what pkgsync applied; it is absent otherwise.
	DriftedCondition = "Drifted"
	// DriftDetectedReason: objects drifted and were not corrected (spec.driftPolicy Report).
	DriftDetectedReason = "DriftDetected"
	// DriftResolvedReason is the reason of the event sent when no drifted object is left.
	DriftResolvedReason = "DriftResolved"
)

// IgnoreFields names fields of applied objects that pkgsync sets when it creates the object and
// then leaves to others: it neither applies them again nor counts their change as drift. Another
// controller (an autoscaler owning a Deployment's spec.replicas, a CA injector owning a webhook's
// caBundle) may then change them.
type IgnoreFields struct {
	// Group of the objects' kind; empty for the core group.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Group string `json:"group,omitempty"`

	// Kind of the objects, for example Deployment.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`

	// Name, when set, selects only the object of this name.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`

	// Namespace, when set, selects only objects of this namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`

	// JSONPointers are the fields, as RFC 6901 JSON pointers into the object
	// ("/spec/replicas", "/webhooks/0/clientConfig/caBundle"). A pointer names a field with all
	// it holds. Not the whole object, nor metadata's name, namespace, labels or annotations as a
	// whole (single labels and annotations may be named: "/metadata/labels/team").
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=512
	// +kubebuilder:validation:items:Pattern="^(/([^~/]|~[01])*)+$"
	JSONPointers []string `json:"jsonPointers"`
}

// ParseJSONPointer splits an RFC 6901 JSON pointer into its unescaped reference tokens. The
// empty pointer (the whole object) and the fields that identify or own an object are refused:
// pkgsync cannot leave those to others.
func ParseJSONPointer(p string) ([]string, error) {
	if p == "" || p == "/" {
		return nil, errors.New("names the whole object; name a field, such as /spec/replicas")
	}
	if !strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("%q is not a JSON pointer (RFC 6901): it must start with /, as in /spec/replicas", p)
	}
	tokens := strings.Split(p[1:], "/")
	for i, t := range tokens {
		for j := 0; j < len(t); j++ {
			if t[j] == '~' && (j+1 == len(t) || (t[j+1] != '0' && t[j+1] != '1')) {
				return nil, fmt.Errorf("%q is not a JSON pointer (RFC 6901): ~ must be followed by 0 (for ~) or 1 (for /)", p)
			}
		}
		t = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
		if t == "" {
			return nil, fmt.Errorf("%q has an empty reference token at position %d", p, i+1)
		}
		tokens[i] = t
	}
	switch {
	case tokens[0] == "apiVersion" || tokens[0] == "kind":
		return nil, fmt.Errorf("%q names the object's type, which pkgsync must set", p)
	case tokens[0] == "metadata" && len(tokens) == 1:
		return nil, fmt.Errorf("%q names the whole metadata; name a single label or annotation instead", p)
	case tokens[0] == "metadata" && len(tokens) == 2 && tokens[1] != "finalizers" && tokens[1] != "ownerReferences":
		return nil, fmt.Errorf("%q identifies the object or holds pkgsync's ownership labels; name a single label or annotation instead (/metadata/labels/KEY)", p)
	case tokens[0] == "metadata" && len(tokens) > 2 && (tokens[1] == "labels" || tokens[1] == "annotations") && strings.HasPrefix(tokens[2], "pkgsync.dev/"):
		return nil, fmt.Errorf("%q is pkgsync's own label or annotation", p)
	}
	return tokens, nil
}

// ValidateIgnoreFields reports every rule and pointer that does not parse, naming it by field
// (field is where the rules are, for example spec.ignoreFields).
func ValidateIgnoreFields(field string, rules []IgnoreFields) error {
	var errs []error
	for i, r := range rules {
		if r.Kind == "" {
			errs = append(errs, fmt.Errorf("%s[%d].kind: required", field, i))
		}
		if len(r.JSONPointers) == 0 {
			errs = append(errs, fmt.Errorf("%s[%d].jsonPointers: required: name at least one field", field, i))
		}
		for j, p := range r.JSONPointers {
			if _, err := ParseJSONPointer(p); err != nil {
				errs = append(errs, fmt.Errorf("%s[%d].jsonPointers[%d]: %w", field, i, j, err))
			}
		}
	}
	return errors.Join(errs...)
}

// DriftStatus reports the objects whose live state differs from what pkgsync applied, as the
// last apply pass found them (spec.driftPolicy Report).
type DriftStatus struct {
	// Count is how many objects drifted; Objects lists the first 20.
	Count int32 `json:"count"`

	// Objects that drifted, with the fields that changed.
	// +optional
	Objects []DriftedObject `json:"objects,omitempty"`
}

// DriftedObject is one object that drifted.
type DriftedObject struct {
	// Object names the object as Kind.group namespace/name, like notAvailable does.
	Object string `json:"object"`

	// Paths are the fields that differ, as JSON pointers (at most 10).
	// +optional
	Paths []string `json:"paths,omitempty"`

	// MorePaths is how many more fields differ than Paths lists.
	// +optional
	MorePaths int32 `json:"morePaths,omitempty"`
}
