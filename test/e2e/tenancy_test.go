package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/reconciler"
)

// The attacks in this file are made as a tenant would: someone who may write only in their own
// namespace (a Secret named like HyperShift's connector Secret, a Package, an ObjectDeployment).

// hostileConnector writes a connector Secret whose kubeconfig reaches the hosted API server
// with its real CA, changed by edit.
func hostileConnector(t *testing.T, namespace string, edit func(*testing.T, map[string]any)) {
	t.Helper()
	good, err := suite.hosted.ConnectorKubeconfig("hostile-" + namespace)
	require.NoError(t, err)
	cfg, err := clientcmd.Load(good)
	require.NoError(t, err)
	var ca []byte
	for _, c := range cfg.Clusters {
		ca = c.CertificateAuthorityData
	}
	user := map[string]any{}
	edit(t, user)
	kubeconfig := map[string]any{
		"apiVersion": "v1", "kind": "Config", "current-context": "hosted",
		"clusters": []any{map[string]any{"name": "hosted", "cluster": map[string]any{
			"server": suite.hosted.Config.Host, "certificate-authority-data": base64.StdEncoding.EncodeToString(ca)}}},
		"users":    []any{map[string]any{"name": "admin", "user": user}},
		"contexts": []any{map[string]any{"name": "hosted", "context": map[string]any{"cluster": "hosted", "user": "admin"}}},
	}
	data, err := (&unstructured.Unstructured{Object: kubeconfig}).MarshalJSON()
	require.NoError(t, err)
	putConnectorSecret(t, namespace, data)
}

// TestConnectorExecPluginNeverRuns: an exec credential plugin in the connector Secret would run
// a command inside the controller.
func TestConnectorExecPluginNeverRuns(t *testing.T) {
	t.Parallel()
	_, hcp := newHostedControlPlane(t, "", true)
	marker := filepath.Join(t.TempDir(), "exec-ran")
	hostileConnector(t, hcp, func(_ *testing.T, user map[string]any) {
		user["exec"] = map[string]any{
			"apiVersion": "client.authentication.k8s.io/v1", "command": "sh", "interactiveMode": "Never",
			"args": []any{"-c", "touch " + marker + `; echo '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"x"}}'`},
		}
	})
	od := inlineDeployment(t, hcp, "exec", "exec-attack")
	require.NoError(t, suite.mgmtClient.Create(t.Context(), od))
	cond := waitForReady(t, od, metav1.ConditionFalse, v1alpha1.InsecureKubeconfigReason)
	assert.Contains(t, cond.Message, `users["admin"].exec`)
	assert.Contains(t, cond.Message, "--insecure-kubeconfig-exec")
	assert.NoFileExists(t, marker, "the plugin must never run")
	assert.False(t, exists(t, suite.hostedClient, "v1", "Namespace", "", "exec-attack"))
}

// TestConnectorTokenFileNeverRead: a tokenFile naming a file of the controller's (here a file
// holding a valid hosted-cluster token) would be read and sent.
func TestConnectorTokenFileNeverRead(t *testing.T) {
	t.Parallel()
	_, hcp := newHostedControlPlane(t, "", true)
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(hostedAdminToken(t)), 0o600))
	hostileConnector(t, hcp, func(_ *testing.T, user map[string]any) { user["tokenFile"] = tokenFile })

	od := inlineDeployment(t, hcp, "tokenfile", "tokenfile-attack")
	require.NoError(t, suite.mgmtClient.Create(t.Context(), od))
	cond := waitForReady(t, od, metav1.ConditionFalse, v1alpha1.InsecureKubeconfigReason)
	assert.Contains(t, cond.Message, `users["admin"].tokenFile`)
	assert.NotContains(t, cond.Message, tokenFile, "status never tells whether a file exists or what it holds")
	assert.False(t, exists(t, suite.hostedClient, "v1", "Namespace", "", "tokenfile-attack"), "nothing is created on the hosted cluster")
	assert.False(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", hcp, "tokenfile-operator"), "hosted phases come first: nothing at all is applied")
}

// hostedAdminToken returns a token of a cluster-admin ServiceAccount of the hosted cluster.
func hostedAdminToken(t *testing.T) string {
	t.Helper()
	cs, err := kubernetes.NewForConfig(suite.hosted.Config)
	require.NoError(t, err)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("admin-%d", nsCounter.Add(1))}}
	require.NoError(t, suite.hostedClient.Create(t.Context(), sa))
	t.Cleanup(func() { _ = suite.hostedClient.Delete(context.Background(), sa) })
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + sa.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: sa.Namespace, Name: sa.Name}},
	}
	require.NoError(t, suite.hostedClient.Create(t.Context(), crb))
	t.Cleanup(func() { _ = suite.hostedClient.Delete(context.Background(), crb) })
	tr, err := cs.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(t.Context(), sa.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	require.NoError(t, err)
	return tr.Status.Token
}

// TestHostedPhasesOnlyFromHostedControlPlaneNamespaces: a tenant copies a connector Secret
// (or writes one for a cluster it wants to reach) into an ordinary namespace and labels the
// namespace like HyperShift does.
func TestHostedPhasesOnlyFromHostedControlPlaneNamespaces(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	kubeconfig, err := suite.hosted.ConnectorKubeconfig("copied-" + ns)
	require.NoError(t, err)
	putConnectorSecret(t, ns, kubeconfig)
	var namespace corev1.Namespace
	require.NoError(t, suite.mgmtClient.Get(t.Context(), client.ObjectKey{Name: ns}, &namespace))
	namespace.Labels = map[string]string{"hypershift.openshift.io/hosted-control-plane": "true"}
	require.NoError(t, suite.mgmtClient.Update(t.Context(), &namespace))

	od := inlineDeployment(t, ns, "copied", "copied-attack")
	require.NoError(t, suite.mgmtClient.Create(t.Context(), od))
	cond := waitForReady(t, od, metav1.ConditionFalse, v1alpha1.NotHostedControlPlaneReason)
	assert.Contains(t, cond.Message, "no HyperShift HostedCluster maps to it")
	assert.False(t, exists(t, suite.hostedClient, "v1", "Namespace", "", "copied-attack"), "nothing reaches the hosted cluster")
	assert.False(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", ns, "copied-operator"), "nothing is applied at all")
}

// clusterRoleBindingNamedIntoNamespace binds cluster-admin to a ServiceAccount of ns, with
// metadata.namespace set to ns as if that made it namespaced.
func clusterRoleBindingNamedIntoNamespace(ns, name string) map[string]any {
	return map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
		"metadata": map[string]any{"name": name, "namespace": ns, "annotations": map[string]any{"pkgsync.dev/phase": "rbac"}},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
		"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": "default", "namespace": ns}},
	}
}

// TestNamespacedOwnersCannotCreateClusterScopedObjects: a ClusterRoleBinding that names the
// owner's namespace is still cluster-scoped.
func TestNamespacedOwnersCannotCreateClusterScopedObjects(t *testing.T) {
	t.Parallel()
	t.Run("ObjectDeployment", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t)
		name := "e2e-escalate-od-" + ns
		raw, err := (&unstructured.Unstructured{Object: clusterRoleBindingNamedIntoNamespace(ns, name)}).MarshalJSON()
		require.NoError(t, err)
		od := &v1alpha1.ObjectDeployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "escalate"},
			Spec: v1alpha1.ObjectDeploymentSpec{Template: v1alpha1.ObjectSetTemplate{Spec: v1alpha1.ObjectSetTemplateSpec{
				Phases: []v1alpha1.ObjectSetPhase{{Name: "rbac", Objects: []v1alpha1.ObjectSetObject{{Object: runtime.RawExtension{Raw: raw}}}}},
			}}},
		}
		require.NoError(t, suite.mgmtClient.Create(t.Context(), od))
		cond := waitForReady(t, od, metav1.ConditionFalse, v1alpha1.ScopeViolationReason)
		assert.Contains(t, cond.Message, "ClusterRoleBinding "+name+" (cluster-scoped)")
		assert.False(t, exists(t, suite.mgmtClient, "rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "", name), "nothing cluster-scoped is created")
	})
	t.Run("Package", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t)
		name := "e2e-escalate-pkg-" + ns
		crb, err := (&unstructured.Unstructured{Object: clusterRoleBindingNamedIntoNamespace(ns, name)}).MarshalJSON()
		require.NoError(t, err)
		pushPackage(t, writePackage(t, map[string]string{
			"manifest.yaml": "apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata:\n  name: escalate\nspec:\n  phases:\n  - name: rbac\n",
			"crb.yaml":      string(crb),
		}), "e2e/"+ns+"/escalate:v1")
		pkg := newPackage(ns, "escalate", suite.registry.Host+"/e2e/"+ns+"/escalate:v1", "")
		require.NoError(t, suite.mgmtClient.Create(t.Context(), pkg))
		cond := waitForReady(t, pkg, metav1.ConditionFalse, v1alpha1.ScopeViolationReason)
		assert.Contains(t, cond.Message, "ClusterRoleBinding "+name+" (cluster-scoped)")
		assert.False(t, exists(t, suite.mgmtClient, "rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "", name), "nothing cluster-scoped is created")
	})
}

// TestPrivatePackageDigestNotServedToOtherNamespaces: namespace B pins the digest of namespace
// A's private package, which the controller has cached, without credentials of its own.
func TestPrivatePackageDigestNotServedToOtherNamespaces(t *testing.T) {
	t.Parallel()
	private := installPrivatePackage(t)

	b := newNamespace(t)
	pkgB := newPackage(b, "stolen", private.registry.Host+"/team-a/private@"+private.digest, "")
	require.NoError(t, suite.mgmtClient.Create(t.Context(), pkgB))
	cond := waitForReady(t, pkgB, metav1.ConditionFalse, v1alpha1.AuthenticationFailedReason)
	assert.Contains(t, cond.Message, "authentication required")
	assert.False(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", b, "private"), "the private package is not installed")

	requestReconcile(t, private.pkg)
	waitForReady(t, private.pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	assert.True(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", private.namespace, "private"), "the owner still gets its package")
}

// TestNamespaceDeletionCompletesWithoutRBAC: a namespace is deleted, and the RoleBinding of the
// ServiceAccount its Package impersonates goes first. Teardown is forbidden for ever; the
// namespace deletion removes the objects anyway, so the finalizer must not hold it.
func TestNamespaceDeletionCompletesWithoutRBAC(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	require.NoError(t, suite.mgmtClient.Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deployer"}}))
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deployer"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}}},
	}
	require.NoError(t, suite.mgmtClient.Create(t.Context(), role))
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deployer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "deployer"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "deployer", Namespace: ns}},
	}
	require.NoError(t, suite.mgmtClient.Create(t.Context(), binding))
	pushPackage(t, writePackage(t, map[string]string{
		"manifest.yaml": "apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata:\n  name: leaving\nspec:\n  phases:\n  - name: config\n",
		"cm.yaml":       "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: leaving\n  annotations:\n    pkgsync.dev/phase: config\ndata:\n  a: b\n",
	}), "e2e/"+ns+"/leaving:v1")
	pkg := newPackage(ns, "leaving", suite.registry.Host+"/e2e/"+ns+"/leaving:v1", "")
	pkg.Spec.ServiceAccountName = "deployer"
	require.NoError(t, suite.mgmtClient.Create(t.Context(), pkg))
	waitForReady(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)

	require.NoError(t, suite.mgmtClient.Delete(t.Context(), binding))
	require.NoError(t, suite.mgmtClient.Delete(t.Context(), namespaceObj(ns)))
	require.NoError(t, suite.mgmtClient.Delete(t.Context(), pkg))
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		err := suite.mgmtClient.Get(t.Context(), client.ObjectKeyFromObject(pkg), &v1alpha1.Package{})
		assert.True(ct, apierrors.IsNotFound(err), "the Package is still there: %v", err)
	}, timeout, interval, "deletion must not hang on a forbidden teardown in a terminating namespace")

	// The Warning event naming what was let go cannot be written: the API server refuses new
	// objects, events included, in a terminating namespace.
}

// TestDefaultServiceAccount: with --default-service-account, resources that name no
// ServiceAccount (every ObjectDeployment) write as that ServiceAccount of their namespace.
func TestDefaultServiceAccount(t *testing.T) {
	t.Parallel()
	runShardController(t, "default-sa", func(o *reconciler.Options) { o.DefaultServiceAccount = "pkgsync-tenant" })

	ns := newNamespace(t)
	require.NoError(t, suite.mgmtClient.Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pkgsync-tenant"}}))
	require.NoError(t, suite.mgmtClient.Create(t.Context(), &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}}},
	}))
	require.NoError(t, suite.mgmtClient.Create(t.Context(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "tenant"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "pkgsync-tenant", Namespace: ns}},
	}))
	object := func(kind, name string) v1alpha1.ObjectSetObject {
		raw, err := (&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": kind, "metadata": map[string]any{"name": name, "namespace": ns},
		}}).MarshalJSON()
		require.NoError(t, err)
		return v1alpha1.ObjectSetObject{Object: runtime.RawExtension{Raw: raw}}
	}
	od := &v1alpha1.ObjectDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant", Labels: map[string]string{shardLabel: "default-sa"}},
		Spec: v1alpha1.ObjectDeploymentSpec{Template: v1alpha1.ObjectSetTemplate{Spec: v1alpha1.ObjectSetTemplateSpec{
			Phases: []v1alpha1.ObjectSetPhase{{Name: "all", Objects: []v1alpha1.ObjectSetObject{object("ConfigMap", "allowed"), object("Secret", "forbidden")}}},
		}}},
	}
	require.NoError(t, suite.mgmtClient.Create(t.Context(), od))
	cond := waitForReady(t, od, metav1.ConditionFalse, v1alpha1.ForbiddenReason)
	assert.Contains(t, cond.Message, "system:serviceaccount:"+ns+":pkgsync-tenant")
	assert.True(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", ns, "allowed"), "what the ServiceAccount may do is done")
	assert.False(t, exists(t, suite.mgmtClient, "v1", "Secret", ns, "forbidden"), "what it may not do is not")
}
