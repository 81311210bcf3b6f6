package e2e

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/internal/reconciler"
	"pkgsync.dev/pkgsync/source"
	"pkgsync.dev/pkgsync/source/signature"
	"pkgsync.dev/pkgsync/test/testenv"
)

// dockerConfig is a .dockerconfigjson with one user's credentials for host.
func dockerConfig(host, user, password string) []byte {
	return fmt.Appendf(nil, `{"auths":{%q:{"auth":%q}}}`, host, base64.StdEncoding.EncodeToString([]byte(user+":"+password)))
}

// putPullSecret creates or replaces the dockerconfigjson Secret name of namespace.
func putPullSecret(t *testing.T, namespace, name string, config []byte) {
	t.Helper()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: config},
	}
	if err := suite.mgmtClient.Create(t.Context(), secret); apierrors.IsAlreadyExists(err) {
		require.NoError(t, suite.mgmtClient.Update(t.Context(), secret))
	} else {
		require.NoError(t, err)
	}
}

// secretWrites counts what the in-process controllers wrote to Secrets of namespace: creations
// (of any Secret there), and updates, patches and deletions of the Secrets named.
func secretWrites(namespace string, names ...string) int {
	base := "/api/v1/namespaces/" + namespace + "/secrets"
	n := suite.requests.path(http.MethodPost, base)
	for _, name := range names {
		n += secretChanges(namespace, name)
	}
	return n
}

// secretChanges counts the updates, patches and deletions of one Secret by the in-process
// controllers.
func secretChanges(namespace, name string) int {
	path := "/api/v1/namespaces/" + namespace + "/secrets/" + name
	return suite.requests.path(http.MethodPut, path) + suite.requests.path(http.MethodPatch, path) + suite.requests.path(http.MethodDelete, path)
}

// assertFleetCopy checks that the Secret name of namespace is the fleet's copy: labelled with
// the fleet, carrying its UID, owned by it with deletionPolicy Delete (and by nothing with
// Orphan), with the type and data given.
func assertFleetCopy(t testingT, fleet *v1alpha1.HostedClusterPackage, namespace, name string, typ corev1.SecretType, data map[string][]byte) {
	t.Helper()
	assertFleetCopyOn(t, suite.mgmtClient, fleet, namespace, name, typ, data)
}

// assertFleetCopyOn is assertFleetCopy on the cluster of c.
func assertFleetCopyOn(t testingT, c client.Client, fleet *v1alpha1.HostedClusterPackage, namespace, name string, typ corev1.SecretType, data map[string][]byte) {
	t.Helper()
	var got corev1.Secret
	if !assert.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: name}, &got), "copy %s/%s", namespace, name) {
		return
	}
	assert.Equal(t, typ, got.Type, "copy %s/%s", namespace, name)
	assert.Equal(t, data, got.Data, "copy %s/%s", namespace, name)
	assert.Equal(t, fleet.Name, got.Labels[v1alpha1.FleetLabel], "copy %s/%s", namespace, name)
	assert.Equal(t, string(fleet.UID), got.Annotations[v1alpha1.FleetUIDAnnotation], "copy %s/%s carries the fleet's UID", namespace, name)
	if fleet.Spec.GetDeletionPolicy() == v1alpha1.FleetDeletionOrphan {
		assert.Empty(t, got.OwnerReferences, "copy %s/%s: no ownerReference with deletionPolicy Orphan", namespace, name)
	} else if assert.Len(t, got.OwnerReferences, 1, "copy %s/%s", namespace, name) {
		assert.Equal(t, fleet.UID, got.OwnerReferences[0].UID, "copy %s/%s is owned by the fleet", namespace, name)
	}
}

// TestFleetSecretsFollowTheFleet: a fleet keeps a copy of the pull and verification Secrets its
// template names, read in the controller's namespace, in every member's namespace. A rotation
// of the pull Secret reaches every member with one write each (a reconcile that changes nothing
// writes none), and the members pull a new version with the new credentials, which the
// registry alone now accepts. Only the verification Secret's public keys are copied. A Secret
// of that name the fleet does not own is never overwritten: its member is reported until it is
// deleted. A member that leaves takes its copies along, and so does the fleet's deletion.
func TestFleetSecretsFollowTheFleet(t *testing.T) {
	t.Parallel()
	const shard = "fleet-secrets"
	controllerNS := newNamespace(t)
	runShardController(t, shard, func(o *reconciler.Options) { o.Namespace = controllerNS })
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{Htpasswd: true})
	hcNamespace := newNamespace(t)
	image := reg.Host + "/e2e/" + hcNamespace + "/secrets:stable"
	ref, err := source.ParseReference(image)
	require.NoError(t, err)
	key, pub := signingKey(t)
	push := func(version string) string {
		t.Helper()
		creds, err := source.CredentialsFromDockerConfigJSON(dockerConfig(reg.Host, reg.Username, reg.Password))
		require.NoError(t, err)
		img, err := source.Build(writePackage(t, versionedPackage(version)), source.BuildOptions{})
		require.NoError(t, err)
		_, err = suite.source.Push(t.Context(), img, []source.Reference{ref}, creds)
		require.NoError(t, err)
		_, err = signature.Sign(t.Context(), suite.source, ref.WithDigest(img.Digest), key, creds)
		require.NoError(t, err)
		return img.Digest
	}
	digest1 := push("1")

	// The sources, in the controller's namespace. The verification Secret holds a private key
	// too, which must stay where it is.
	putPullSecret(t, controllerNS, "registry", dockerConfig(reg.Host, reg.Username, reg.Password))
	putKeys(t, controllerNS, map[string][]byte{"cosign.pub": pub, "cosign.key": []byte("private, stays in the controller's namespace")})
	clusters := newFleetClusters(t, hcNamespace, hcNamespace, "", "", "", "")
	require.Len(t, clusters, 4)
	// One member's namespace has a Secret "registry" of its own.
	foreignNS := hosted.ControlPlaneNamespace(hcNamespace, "hc3")
	foreign := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: foreignNS, Name: "registry", Labels: map[string]string{"team": "mine"}},
		Data:       map[string][]byte{"note": []byte("hand-made, not the fleet's")},
	}
	require.NoError(t, suite.mgmtClient.Create(t.Context(), foreign))
	members := []string{}
	for ns := range clusters {
		if ns != foreignNS {
			members = append(members, ns)
		}
	}

	fleet := verifiedFleet("secrets-"+hcNamespace[len(hcNamespace)-8:], shard, hcNamespace, image)
	fleet.Spec.Template.Spec.PullSecretRef = &meta.LocalObjectReference{Name: "registry"}
	newFleet(t, fleet)
	got := waitForFleet(t, fleet.Name, metav1.ConditionFalse, v1alpha1.MembersFailedReason, digest1)
	pullData := map[string][]byte{corev1.DockerConfigJsonKey: dockerConfig(reg.Host, reg.Username, reg.Password)}
	keyData := map[string][]byte{"cosign.pub": pub}
	eventually(t, func(a *attempt) {
		for _, ns := range members {
			assertFleetCopy(a, fleet, ns, "registry", corev1.SecretTypeDockerConfigJson, pullData)
			assertFleetCopy(a, fleet, ns, "signing-keys", corev1.SecretTypeOpaque, keyData)
			cm := &corev1.ConfigMap{}
			if assert.NoError(a, suite.mgmtClient.Get(a.Context(), client.ObjectKey{Namespace: ns, Name: "signed"}, cm)) {
				assert.Equal(a, "1", cm.Data["version"], "member %s installed v1 with the copied credentials", ns)
			}
		}
	}, "every member has the copies and installed v1")

	// The Secret the fleet does not own is left as it was, and its member reported.
	assertForeignUntouched := func() {
		t.Helper()
		var now corev1.Secret
		require.NoError(t, suite.mgmtClient.Get(t.Context(), client.ObjectKeyFromObject(foreign), &now))
		assert.Equal(t, foreign.ResourceVersion, now.ResourceVersion, "the foreign Secret is not written")
		assert.Equal(t, foreign.Data, now.Data, "the foreign Secret is not overwritten")
		assert.Equal(t, map[string]string{"team": "mine"}, now.Labels)
		assert.Empty(t, now.OwnerReferences)
		assert.Zero(t, secretChanges(foreignNS, "registry"), "nothing written to the foreign Secret")
	}
	assertForeignUntouched()
	require.NoError(t, suite.mgmtClient.Get(t.Context(), client.ObjectKeyFromObject(fleet), got))
	var reported *v1alpha1.MemberStatus
	for i, m := range got.Status.FailedMembers {
		if m.Namespace == foreignNS {
			reported = &got.Status.FailedMembers[i]
		}
	}
	if assert.NotNil(t, reported, "the member whose Secret collides is listed: %+v", got.Status.FailedMembers) {
		assert.Equal(t, v1alpha1.SecretCollisionReason, reported.Reason)
		assert.Contains(t, reported.Message, "Secret "+foreignNS+"/registry")
	}

	// A tenant's namespace gets no copy, whatever it carries: the label HyperShift puts on
	// hosted-control-plane namespaces, and a Package dressed as the fleet's member (its label,
	// an owner reference to the fleet). Copies go only to the namespaces the fleet's
	// HostedClusters map to.
	tenantNS := newNamespace(t)
	tenant := &corev1.Namespace{}
	require.NoError(t, suite.mgmtClient.Get(t.Context(), client.ObjectKey{Name: tenantNS}, tenant))
	tenant.Labels["hypershift.openshift.io/hosted-control-plane"] = "true"
	require.NoError(t, suite.mgmtClient.Update(t.Context(), tenant))
	forged := &v1alpha1.Package{
		ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: fleet.Name,
			Labels:          map[string]string{v1alpha1.FleetLabel: fleet.Name, shardLabel: shard},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.HostedClusterPackageKind, Name: fleet.Name, UID: fleet.UID}}},
		Spec: v1alpha1.PackageSpec{Image: image, PullSecretRef: &meta.LocalObjectReference{Name: "registry"}},
	}
	require.NoError(t, suite.mgmtClient.Create(t.Context(), forged))
	cleanupObject(t, forged)
	waitForFleetRequest(t, fleet)
	for _, name := range []string{"registry", "signing-keys"} {
		err := suite.mgmtClient.Get(t.Context(), client.ObjectKey{Namespace: tenantNS, Name: name}, &corev1.Secret{})
		assert.True(t, apierrors.IsNotFound(err), "no copy of %s in the tenant's namespace: %v", name, err)
	}
	assert.Zero(t, secretWrites(tenantNS, "registry", "signing-keys"), "no Secret written in the tenant's namespace")

	// A reconcile that changes nothing writes no Secret.
	before := map[string]int{}
	for _, ns := range members {
		before[ns] = secretWrites(ns, "registry", "signing-keys")
	}
	waitForFleetRequest(t, fleet)
	for _, ns := range members {
		assert.Equal(t, before[ns], secretWrites(ns, "registry", "signing-keys"), "Secret writes in %s of a reconcile that changes nothing", ns)
	}

	// Rotation: the registry takes only the new password; the Secret in the controller's
	// namespace is changed, and nothing else. Each member's copy is written once.
	updates := map[string]int{}
	for _, ns := range members {
		updates[ns] = suite.requests.path(http.MethodPut, "/api/v1/namespaces/"+ns+"/secrets/registry")
	}
	oldCreds, err := source.CredentialsFromDockerConfigJSON(dockerConfig(reg.Host, reg.Username, reg.Password))
	require.NoError(t, err)
	require.NoError(t, reg.SetPassword("rotated-"+hcNamespace))
	fresh, err := source.NewClient(source.Options{})
	require.NoError(t, err)
	_, err = fresh.Resolve(t.Context(), ref, oldCreds)
	require.ErrorIs(t, err, source.ErrAuthenticationRequired, "the registry refuses the old password")
	rotated := map[string][]byte{corev1.DockerConfigJsonKey: dockerConfig(reg.Host, reg.Username, reg.Password)}
	putPullSecret(t, controllerNS, "registry", rotated[corev1.DockerConfigJsonKey])
	eventually(t, func(a *attempt) {
		for _, ns := range members {
			assertFleetCopy(a, fleet, ns, "registry", corev1.SecretTypeDockerConfigJson, rotated)
		}
	}, "the rotation reaches every member's namespace")
	// A reconcile after it: the copies are up to date, nothing more is written.
	waitForFleetRequest(t, fleet)
	for _, ns := range members {
		assert.Equal(t, 1, suite.requests.path(http.MethodPut, "/api/v1/namespaces/"+ns+"/secrets/registry")-updates[ns], "one update of the copy in %s per rotation", ns)
		assert.Equal(t, before[ns]+1, secretWrites(ns, "registry", "signing-keys"), "Secret writes in %s: the one update", ns)
	}
	assertForeignUntouched()

	// The members pull a new version with the new credentials: the old ones are refused now.
	digest2 := push("2")
	waitForFleetRequest(t, fleet)
	waitForFleet(t, fleet.Name, metav1.ConditionFalse, v1alpha1.MembersFailedReason, digest2)
	eventually(t, func(a *attempt) {
		for _, ns := range members {
			cm := &corev1.ConfigMap{}
			if assert.NoError(a, suite.mgmtClient.Get(a.Context(), client.ObjectKey{Namespace: ns, Name: "signed"}, cm)) {
				assert.Equal(a, "2", cm.Data["version"], "member %s pulled v2 with the rotated credentials", ns)
			}
		}
	}, "every member pulls v2 with the rotated credentials")

	// The foreign Secret deleted, the fleet writes its own copy there.
	require.NoError(t, suite.mgmtClient.Delete(t.Context(), foreign))
	eventually(t, func(a *attempt) {
		assertFleetCopy(a, fleet, foreignNS, "registry", corev1.SecretTypeDockerConfigJson, rotated)
	}, "the fleet copies the Secret once the foreign one is gone")
	waitForFleet(t, fleet.Name, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, digest2)

	// A member that leaves takes its copies along.
	leaving := members[0]
	hc := clusters[leaving]
	require.NoError(t, suite.mgmtClient.Get(t.Context(), client.ObjectKeyFromObject(hc), hc))
	unstructured.RemoveNestedField(hc.Object, "metadata", "labels", "e2e.pkgsync.dev/fleet")
	require.NoError(t, suite.mgmtClient.Update(t.Context(), hc))
	eventually(t, func(a *attempt) {
		for _, name := range []string{"registry", "signing-keys"} {
			err := suite.mgmtClient.Get(a.Context(), client.ObjectKey{Namespace: leaving, Name: name}, &corev1.Secret{})
			assert.True(a, apierrors.IsNotFound(err), "copy %s/%s removed with its member: %v", leaving, name, err)
		}
		assert.NotContains(a, fleetMembers(a, a.Context(), fleet.Name), leaving)
	}, "the copies go with the member")

	// Deleting the fleet (deletionPolicy Delete) deletes the members, then the copies.
	require.NoError(t, suite.mgmtClient.Delete(t.Context(), fleet))
	eventually(t, func(a *attempt) {
		err := suite.mgmtClient.Get(a.Context(), client.ObjectKeyFromObject(fleet), &v1alpha1.HostedClusterPackage{})
		assert.True(a, apierrors.IsNotFound(err), "fleet gone: %v", err)
		for ns := range clusters {
			for _, name := range []string{"registry", "signing-keys"} {
				err := suite.mgmtClient.Get(a.Context(), client.ObjectKey{Namespace: ns, Name: name}, &corev1.Secret{})
				assert.True(a, apierrors.IsNotFound(err), "copy %s/%s deleted with the fleet: %v", ns, name, err)
			}
		}
	}, "the fleet and its copies are gone")
	for _, name := range []string{"registry", "signing-keys"} {
		assert.NoError(t, suite.mgmtClient.Get(t.Context(), client.ObjectKey{Namespace: controllerNS, Name: name}, &corev1.Secret{}), "the source %s stays", name)
	}
}
