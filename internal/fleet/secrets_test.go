package fleet

import (
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

func TestFleetSecretNames(t *testing.T) {
	t.Parallel()
	fleet := &v1alpha1.HostedClusterPackage{}
	fleet.Spec.Template.Spec.PullSecretRef = &meta.LocalObjectReference{Name: "pull"}
	fleet.Spec.Template.Spec.Verify = &v1alpha1.Verification{SecretRef: meta.LocalObjectReference{Name: "keys"}}
	assert.Equal(t, map[string]secretRole{"pull": rolePull, "keys": roleVerify}, fleetSecretNames(fleet))

	// Members the rollout has not moved read the stable revision's Secrets.
	fleet.Status.Stable = &v1alpha1.FleetStableRevision{}
	fleet.Status.Stable.Template.Spec.PullSecretRef = &meta.LocalObjectReference{Name: "old-pull"}
	fleet.Status.Stable.Template.Spec.Verify = &v1alpha1.Verification{SecretRef: meta.LocalObjectReference{Name: "pull"}}
	assert.Equal(t, map[string]secretRole{"pull": rolePull | roleVerify, "keys": roleVerify, "old-pull": rolePull}, fleetSecretNames(fleet))
	assert.Equal(t, []string{"keys", "old-pull", "pull"}, indexFleetSecrets(fleet))
}

func TestCopiedData(t *testing.T) {
	t.Parallel()
	config := []byte(`{"auths":{}}`)
	source := &corev1.Secret{Data: map[string][]byte{
		corev1.DockerConfigJsonKey: config,
		"cosign.pub":               []byte("public"),
		"cosign.key":               []byte("private"),
		v1alpha1.TrustedRootKey:    []byte("root"),
		"token":                    []byte("other"),
	}}
	tests := []struct {
		name   string
		source *corev1.Secret
		role   secretRole
		data   map[string][]byte
		typ    corev1.SecretType
		ok     bool
	}{
		{"pull: the docker config alone", source, rolePull, map[string][]byte{corev1.DockerConfigJsonKey: config}, corev1.SecretTypeDockerConfigJson, true},
		{"verify: public keys and the trusted root, never the private key", source, roleVerify,
			map[string][]byte{"cosign.pub": []byte("public"), v1alpha1.TrustedRootKey: []byte("root")}, corev1.SecretTypeOpaque, true},
		{"both", source, rolePull | roleVerify,
			map[string][]byte{corev1.DockerConfigJsonKey: config, "cosign.pub": []byte("public"), v1alpha1.TrustedRootKey: []byte("root")}, corev1.SecretTypeDockerConfigJson, true},
		{"pull without a docker config", &corev1.Secret{Data: map[string][]byte{"token": nil}}, rolePull, nil, "", false},
		{"verify without a key", &corev1.Secret{Data: map[string][]byte{"cosign.key": nil}}, roleVerify, nil, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			data, typ, ok := copiedData(tc.source, tc.role)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.data, data)
			assert.Equal(t, tc.typ, typ)
		})
	}
}

// TestCopyUpToDate: what makes a copy drift, for each deletionPolicy: with Delete the copy is
// controlled by the fleet; with Orphan it has no ownerReference to it (no cascade of kubectl
// delete may delete it); with both it carries the fleet's label and UID.
func TestCopyUpToDate(t *testing.T) {
	t.Parallel()
	src := sourceSecret{name: "pull", typ: corev1.SecretTypeDockerConfigJson, data: map[string][]byte{corev1.DockerConfigJsonKey: []byte("a")}}
	for _, policy := range []v1alpha1.FleetDeletionPolicy{v1alpha1.FleetDeletionDelete, v1alpha1.FleetDeletionOrphan} {
		fleet := &v1alpha1.HostedClusterPackage{ObjectMeta: metav1.ObjectMeta{Name: "addon", UID: "fleet-uid"}}
		fleet.Spec.DeletionPolicy = policy
		good := func() *corev1.Secret {
			s := &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v1alpha1.FleetLabel: "addon"},
					Annotations: map[string]string{v1alpha1.FleetUIDAnnotation: "fleet-uid"}},
				Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte("a")},
			}
			if policy == v1alpha1.FleetDeletionDelete {
				s.OwnerReferences = []metav1.OwnerReference{{UID: "fleet-uid", Controller: ptr.To(true)}}
			}
			return s
		}
		assert.True(t, copyUpToDate(good(), fleet, src), policy)
		changes := map[string]func(*corev1.Secret){
			"rotated":                  func(s *corev1.Secret) { s.Data[corev1.DockerConfigJsonKey] = []byte("b") },
			"a key added":              func(s *corev1.Secret) { s.Data["extra"] = []byte("x") },
			"another type":             func(s *corev1.Secret) { s.Type = corev1.SecretTypeOpaque },
			"label taken off":          func(s *corev1.Secret) { s.Labels = nil },
			"UID annotation taken off": func(s *corev1.Secret) { s.Annotations = nil },
			"another fleet's UID":      func(s *corev1.Secret) { s.Annotations[v1alpha1.FleetUIDAnnotation] = "other-uid" },
			"a second reference to it": func(s *corev1.Secret) {
				s.OwnerReferences = append(s.OwnerReferences, metav1.OwnerReference{UID: "fleet-uid"})
			},
			"an ownerReference to it": func(s *corev1.Secret) {
				s.OwnerReferences = []metav1.OwnerReference{{UID: "fleet-uid", Controller: ptr.To(true)}}
			},
			"owner taken off":  func(s *corev1.Secret) { s.OwnerReferences = nil },
			"not a controller": func(s *corev1.Secret) { s.OwnerReferences = []metav1.OwnerReference{{UID: "fleet-uid"}} },
		}
		if policy == v1alpha1.FleetDeletionDelete {
			delete(changes, "an ownerReference to it")
		} else {
			delete(changes, "owner taken off")
		}
		for name, change := range changes {
			s := good()
			change(s)
			assert.False(t, copyUpToDate(s, fleet, src), "%s: %s", policy, name)
		}
		assert.False(t, copyUpToDate(nil, fleet, src))
	}
}
