package e2e

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/reconciler"
	"pkgsync.dev/pkgsync/source"
	"pkgsync.dev/pkgsync/source/signature"
)

// waitForFleetRequest asks the fleet to reconcile (and resolve its tag) now and waits until it
// reports the request handled.
func waitForFleetRequest(t *testing.T, fleet *v1alpha1.HostedClusterPackage) *v1alpha1.HostedClusterPackage {
	t.Helper()
	requestFleetReconcile(t, fleet)
	token := fleet.Annotations[meta.ReconcileRequestAnnotation]
	got := &v1alpha1.HostedClusterPackage{}
	eventually(t, func(a *attempt) {
		if assert.NoError(a, suite.mgmtClient.Get(a.Context(), client.ObjectKeyFromObject(fleet), got)) {
			assert.Equal(a, token, got.Status.LastHandledReconcileAt, "reconcile request handled")
		}
	})
	return got
}

// fleetEvents sums the counts of the fleet's events of a type and reason.
func fleetEvents(t testingT, ctx context.Context, name, eventType, reason string) int32 {
	var events corev1.EventList
	require.NoError(t, suite.mgmtClient.List(ctx, &events))
	var n int32
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == v1alpha1.HostedClusterPackageKind && e.InvolvedObject.Name == name && e.Type == eventType && e.Reason == reason {
			n += max(e.Count, 1)
		}
	}
	return n
}

// A fleet whose template has spec.verify verifies each newly resolved digest before it becomes
// the rollout target: a signed v1 rolls out; an unsigned digest pushed under the same tag is
// refused by the fleet (VerificationFailed, one Warning event, the target and every member
// left as they were); a signed v2 then rolls out. Members verify the digests the fleet verified
// from the shared cache: the signatures are read once per digest.
func TestFleetVerification(t *testing.T) {
	t.Parallel()
	const shard = "fleet-verify"
	controllerNS := newNamespace(t)
	runShardController(t, shard, func(o *reconciler.Options) { o.Namespace = controllerNS })

	hcNamespace := newNamespace(t)
	repo := "e2e/" + hcNamespace + "/fleet-signed"
	image := suite.registry.Host + "/" + repo + ":v1"
	ref, err := source.ParseReference(image)
	require.NoError(t, err)
	key, pub := signingKey(t)
	signatureReads := func(digest string) int {
		return suite.registryRequests.count(http.MethodGet, "/v2/"+repo+"/manifests/"+signature.SignatureTag(digest))
	}

	digest1 := pushPackage(t, writePackage(t, versionedPackage("1")), repo+":v1")
	_, err = signature.Sign(t.Context(), suite.source, ref.WithDigest(digest1), key, nil)
	require.NoError(t, err)
	signedReads := signatureReads(digest1) // signing reads the tag too
	// The fleet reads the Secret in the controller's namespace, each member in its own, where
	// the fleet keeps a copy.
	putKeys(t, controllerNS, map[string][]byte{"cosign.pub": pub})
	clusters := newFleetClusters(t, hcNamespace, hcNamespace, "", "")
	require.Len(t, clusters, 2)

	fleet := verifiedFleet("signed-"+hcNamespace[len(hcNamespace)-8:], shard, hcNamespace, image)
	newFleet(t, fleet)
	waitForFleet(t, fleet.Name, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, digest1)
	for cp := range clusters {
		assert.Equal(t, "1", configMapData(t, cp, "signed")["version"])
	}
	assert.Equal(t, signedReads+1, signatureReads(digest1), "the fleet verified v1 once; its members found the verdict in the cache")

	// Tampered: an unsigned digest under the tag the fleet rolled out.
	before := fleetMembers(t, t.Context(), fleet.Name)
	require.Len(t, before, 2)
	digest2 := pushPackage(t, writePackage(t, versionedPackage("2")), repo+":v1")
	waitForFleetRequest(t, fleet)
	got := waitForFleet(t, fleet.Name, metav1.ConditionFalse, v1alpha1.VerificationFailedReason, digest1)
	msg := conditions.GetMessage(got, meta.ReadyCondition)
	assert.Contains(t, msg, digest2)
	assert.Contains(t, msg, "no signature found")
	assert.Contains(t, msg, "Secret "+controllerNS+"/signing-keys")
	assert.Contains(t, msg, "[cosign.pub]", "the key set")
	require.NotNil(t, got.Status.Stable)
	assert.Equal(t, digest1, got.Status.Stable.Digest, "the stable revision stays")
	// Another pass refuses the digest again: no second event, no member touched.
	waitForFleetRequest(t, fleet)
	eventually(t, func(a *attempt) {
		assert.Equal(a, int32(1), fleetEvents(a, a.Context(), fleet.Name, corev1.EventTypeWarning, v1alpha1.VerificationFailedReason), "one Warning event per transition")
	})
	after := fleetMembers(t, t.Context(), fleet.Name)
	for ns, m := range before {
		assert.Equal(t, m.Generation, after[ns].Generation, "member %s untouched", ns)
		assert.Equal(t, m.Spec.Image, after[ns].Spec.Image, "member %s untouched", ns)
		assert.Equal(t, "1", configMapData(t, ns, "signed")["version"])
	}
	// While it refuses the new digest, the fleet still manages its members: one pointed at the
	// unsigned digest by hand is put back on v1.
	var drifted string
	for ns := range after {
		drifted = ns
		break
	}
	member := after[drifted]
	patch := fmt.Sprintf(`{"spec":{"image":%q}}`, ref.WithDigest(digest2).String())
	require.NoError(t, suite.mgmtClient.Patch(t.Context(), &member, client.RawPatch(types.MergePatchType, []byte(patch))))
	eventually(t, func(a *attempt) {
		m, ok := fleetMembers(a, a.Context(), fleet.Name)[drifted]
		if assert.True(a, ok, "member %s", drifted) {
			assert.Equal(a, ref.WithDigest(digest1).String(), m.Spec.Image, "the drifted member is back on v1")
		}
	})
	got = waitForFleet(t, fleet.Name, metav1.ConditionFalse, v1alpha1.VerificationFailedReason, digest1)
	assert.Equal(t, digest1, got.Status.Target.Digest, "the target stays the verified one")

	// Signed after all: rolled out.
	_, err = signature.Sign(t.Context(), suite.source, ref.WithDigest(digest2), key, nil)
	require.NoError(t, err)
	waitForFleetRequest(t, fleet)
	waitForFleet(t, fleet.Name, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, digest2)
	for cp := range clusters {
		assert.Equal(t, "2", configMapData(t, cp, "signed")["version"])
	}
	members := fleetMembers(t, t.Context(), fleet.Name)
	for ns, m := range members {
		assert.Equal(t, ref.WithDigest(digest2).String(), m.Spec.Image, "member %s pinned to v2", ns)
	}
	assert.Equal(t, int32(1), fleetEvents(t, t.Context(), fleet.Name, corev1.EventTypeWarning, v1alpha1.VerificationFailedReason))
}

// verifiedFleet is a fleet of shard over the HostedClusters labelled for hcNamespace
// (newFleetClusters), installing image with spec.verify naming the Secret signing-keys.
func verifiedFleet(name, shard, hcNamespace, image string) *v1alpha1.HostedClusterPackage {
	labels := map[string]string{shardLabel: shard}
	return &v1alpha1.HostedClusterPackage{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: v1alpha1.HostedClusterPackageSpec{
			HostedClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"e2e.pkgsync.dev/fleet": hcNamespace}},
			Template: v1alpha1.PackageTemplate{
				Metadata: v1alpha1.TemplateMetadata{Labels: labels},
				Spec: v1alpha1.PackageSpec{Image: image,
					Verify: &v1alpha1.Verification{SecretRef: meta.LocalObjectReference{Name: "signing-keys"}}},
			},
		},
	}
}
