package e2e

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/source"
	"pkgsync.dev/pkgsync/source/signature"
	"pkgsync.dev/pkgsync/test/testenv"
)

// privatePackage is a package team A keeps in a registry only A may read.
type privatePackage struct {
	registry *testenv.Registry
	// creds are A's: they read and write the registry.
	creds source.Credentials
	// digest is the package's manifest digest; namespace and pkg are A's, Ready.
	digest    string
	namespace string
	pkg       *v1alpha1.Package
}

// installPrivatePackage pushes a package of one ConfigMap (named private) to a registry with
// basic authentication, and installs it in a new namespace with a pull secret, so that the
// controller has it pulled, rendered and cached.
func installPrivatePackage(t *testing.T) privatePackage {
	t.Helper()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{Htpasswd: true})
	auth := base64.StdEncoding.EncodeToString([]byte(reg.Username + ":" + reg.Password))
	dockerConfig := fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, reg.Host, auth)
	creds, err := source.CredentialsFromDockerConfigJSON([]byte(dockerConfig))
	require.NoError(t, err)
	img, err := source.Build(writePackage(t, map[string]string{
		"manifest.yaml": "apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata:\n  name: private\nspec:\n  phases:\n  - name: config\n",
		"cm.yaml":       "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: private\n  annotations:\n    pkgsync.dev/phase: config\ndata:\n  secret: sauce\n",
	}), source.BuildOptions{})
	require.NoError(t, err)
	ref, err := source.ParseReference(reg.Host + "/team-a/private:v1")
	require.NoError(t, err)
	_, err = suite.source.Push(t.Context(), img, []source.Reference{ref}, creds)
	require.NoError(t, err)

	ns := newNamespace(t)
	require.NoError(t, suite.mgmtClient.Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "registry"},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(dockerConfig)},
	}))
	pkg := newPackage(ns, "private", ref.String(), "")
	pkg.Spec.PullSecretRef = &meta.LocalObjectReference{Name: "registry"}
	require.NoError(t, suite.mgmtClient.Create(t.Context(), pkg))
	waitForReady(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	return privatePackage{registry: reg, creds: creds, digest: img.Digest, namespace: ns, pkg: pkg}
}

// lyingRegistry serves a tenant's own registry, except that it answers every HEAD request for a
// manifest by digest with 200, as if it held that digest. A HEAD proves nothing about content;
// the registry cannot serve the manifest itself. It returns the registry's host.
func lyingRegistry(t *testing.T, own *testenv.Registry) string {
	t.Helper()
	target, err := url.Parse("http://" + own.Host)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, dgst, ok := strings.Cut(r.URL.Path, "/manifests/"); ok && strings.HasPrefix(dgst, "sha256:") && r.Method == http.MethodHead {
			w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
			w.Header().Set("Docker-Content-Digest", dgst)
			w.Header().Set("Content-Length", strconv.Itoa(512))
			w.WriteHeader(http.StatusOK)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// TestCachedRenderNotServedThroughAnotherRegistry: namespace B names the digest of namespace A's
// private package in a registry B runs, which claims to hold every digest. The controller has
// A's package rendered; B must get nothing of it, also when B signs the digest with its own key
// and verifies with it (as --require-signatures asks).
func TestCachedRenderNotServedThroughAnotherRegistry(t *testing.T) {
	t.Parallel()
	private := installPrivatePackage(t)
	own := testenv.NewRegistry(t, testenv.RegistryOptions{Own: true})
	lying := lyingRegistry(t, own)

	t.Run("unsigned", func(t *testing.T) {
		b := newNamespace(t)
		pkg := newPackage(b, "stolen", lying+"/anything@"+private.digest, "")
		require.NoError(t, suite.mgmtClient.Create(t.Context(), pkg))
		cond := waitForReady(t, pkg, metav1.ConditionFalse, v1alpha1.PullFailedReason)
		assert.Contains(t, cond.Message, lying)
		assert.False(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", b, "private"), "A's package is not installed in B")
	})

	t.Run("signed by the attacker", func(t *testing.T) {
		b := newNamespace(t)
		ref, err := source.ParseReference(lying + "/anything@" + private.digest)
		require.NoError(t, err)
		key, pub := signingKey(t)
		// B's signature of A's digest, pushed to B's registry next to the digest it claims.
		_, err = signature.Sign(t.Context(), suite.source, ref, key, nil)
		require.NoError(t, err)
		putKeys(t, b, map[string][]byte{"cosign.pub": pub})
		pkg := newPackage(b, "stolen", ref.String(), "")
		pkg.Spec.Verify = &v1alpha1.Verification{SecretRef: meta.LocalObjectReference{Name: "signing-keys"}}
		require.NoError(t, suite.mgmtClient.Create(t.Context(), pkg))
		cond := waitForReady(t, pkg, metav1.ConditionFalse, v1alpha1.PullFailedReason)
		assert.Contains(t, cond.Message, lying)
		assert.False(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", b, "private"), "A's package is not installed in B")
	})

	requestReconcile(t, private.pkg)
	waitForReady(t, private.pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	assert.True(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", private.namespace, "private"), "the owner still gets its package")
}

// TestCachedVerdictNotServedWithoutAccess: a tenant without credentials names another
// namespace's private digest, which the controller verified and remembers as signed by the
// owner's key, with that (public) key in its own spec.verify. The remembered verdict is not
// served to it: it would tell whether the private digest is signed by a key, which the tenant
// could not read from the registry. Its verification fails as for a digest nobody verified: the
// registry refuses it the signatures.
func TestCachedVerdictNotServedWithoutAccess(t *testing.T) {
	t.Parallel()
	private := installPrivatePackage(t)
	key, pub := signingKey(t)
	ref, err := source.ParseReference(private.pkg.Spec.Image)
	require.NoError(t, err)
	_, err = signature.Sign(t.Context(), suite.source, ref.WithDigest(private.digest), key, private.creds)
	require.NoError(t, err)
	putKeys(t, private.namespace, map[string][]byte{"cosign.pub": pub})
	updateObject(t, private.pkg, func() {
		private.pkg.Spec.Verify = &v1alpha1.Verification{SecretRef: meta.LocalObjectReference{Name: "signing-keys"}}
	})
	waitForVerdict(t, private.pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)

	b := newNamespace(t)
	putKeys(t, b, map[string][]byte{"cosign.pub": pub})
	pkg := newPackage(b, "probe", private.registry.Host+"/team-a/private@"+private.digest, "")
	pkg.Spec.Verify = &v1alpha1.Verification{SecretRef: meta.LocalObjectReference{Name: "signing-keys"}}
	require.NoError(t, suite.mgmtClient.Create(t.Context(), pkg))
	cond := waitForReadyMessage(t, pkg, metav1.ConditionFalse, v1alpha1.AuthenticationFailedReason, "(spec.verify: ")
	assert.Contains(t, cond.Message, "authentication required", "stopped at verification, as an unverified digest is")
}

// TestCachedRenderNotServedThroughHostedClusterMirror: whoever writes a HostedCluster names, in
// its spec.imageContentSources, a registry they run as the mirror of namespace A's private
// registry; the registry claims to hold every digest. A Package of that HostedCluster's
// namespace names A's private package by digest, without credentials: the mirror's word must get
// it neither A's render nor A's package (it proves access only to what is read from it).
func TestCachedRenderNotServedThroughHostedClusterMirror(t *testing.T) {
	t.Parallel()
	private := installPrivatePackage(t)
	own := testenv.NewRegistry(t, testenv.RegistryOptions{Own: true})
	lying := lyingRegistry(t, own)

	_, hcp := mirroredHostedCluster(t, newNamespace(t), "thief",
		[]any{map[string]any{"source": private.registry.Host, "mirrors": []any{lying}}})
	pkg := newPackage(hcp, "stolen", private.registry.Host+"/team-a/private@"+private.digest, "")
	require.NoError(t, suite.mgmtClient.Create(t.Context(), pkg))
	cond := waitForReady(t, pkg, metav1.ConditionFalse, v1alpha1.PullFailedReason)
	assert.Contains(t, cond.Message, lying)
	assert.False(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", hcp, "private"), "A's package is installed through a HostedCluster's mirror")

	requestReconcile(t, private.pkg)
	waitForReady(t, private.pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
}
