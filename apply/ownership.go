package apply

import (
	"crypto/sha256"
	"encoding/hex"

	"k8s.io/apimachinery/pkg/util/validation"
)

const (
	// LabelOwnerKind, LabelOwnerNamespace and LabelOwnerName mark every applied object with the
	// resource that owns it. Labels rather than ownerReferences: owners may live in another
	// cluster (hosted-cluster phases) and cluster-scoped objects may belong to namespaced owners.
	LabelOwnerKind      = "pkgsync.dev/owner-kind"
	LabelOwnerNamespace = "pkgsync.dev/owner-namespace"
	LabelOwnerName      = "pkgsync.dev/owner-name"

	// RecreateAnnotation set to "true" on an object lets pkgsync delete and recreate it when a
	// change touches an immutable field.
	RecreateAnnotation = "pkgsync.dev/recreate-on-immutable"

	// DesiredHashAnnotation holds a hash of the object as pkgsync last applied it, so that a
	// revision that only removes fields is still applied.
	DesiredHashAnnotation = "pkgsync.dev/desired-hash"

	// DefaultFieldManager is the server-side apply field manager.
	DefaultFieldManager = "pkgsync"
)

// labels returns the ownership labels of the owner.
func (o Owner) labels() map[string]string {
	return map[string]string{
		LabelOwnerKind:      labelValue(o.Kind),
		LabelOwnerNamespace: labelValue(o.Namespace),
		LabelOwnerName:      labelValue(o.Name),
	}
}

// owns reports whether an object's labels name this owner.
func (o Owner) owns(labels map[string]string) bool {
	for k, v := range o.labels() {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// ownerFromLabels describes the owner an object's labels name, or "" when there is none.
func ownerFromLabels(labels map[string]string) string {
	if labels[LabelOwnerKind] == "" && labels[LabelOwnerName] == "" {
		return ""
	}
	return Owner{Kind: labels[LabelOwnerKind], Namespace: labels[LabelOwnerNamespace], Name: labels[LabelOwnerName]}.String()
}

// labelValue keeps valid label values as they are. Names longer than 63 characters (object
// names may have 253) become a prefix plus a hash, still unique and stable.
func labelValue(s string) string {
	if len(validation.IsValidLabelValue(s)) == 0 {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	prefix := s
	if len(prefix) > 46 {
		prefix = prefix[:46]
	}
	return prefix + "-" + hex.EncodeToString(sum[:])[:16]
}
