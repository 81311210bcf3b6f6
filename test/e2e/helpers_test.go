package e2e

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/source"
	"pkgsync.dev/pkgsync/test/testenv"
)

var nsCounter atomic.Int32

// testingT is what the helpers of this package report to: the test itself outside a wait, an
// attempt of eventually inside one. A wait's condition runs in another goroutine: a failure
// reported there to the test's *testing.T would end the test instead of trying again.
type testingT interface {
	require.TestingT
	Helper()
	Context() context.Context
}

// attempt is one run of an eventually condition: failures reported to it (require's included)
// end this run and the condition is tried again, until the wait's timeout.
type attempt struct {
	*assert.CollectT
	ctx context.Context
}

// Helper is a no-op: failures of an attempt are reported by the wait that made it.
func (*attempt) Helper() {}

// Context is the test's context: an attempt ends with the test.
func (a *attempt) Context() context.Context { return a.ctx }

// eventually runs condition every interval until one run reports no failure, and fails the
// test with the last run's failures after timeout.
func eventually(t *testing.T, condition func(a *attempt), msgAndArgs ...any) {
	t.Helper()
	eventuallyWithin(t, t.Context(), condition, msgAndArgs...)
}

// eventuallyWithin is eventually for cleanups, which run after the test's context has ended.
func eventuallyWithin(t *testing.T, ctx context.Context, condition func(a *attempt), msgAndArgs ...any) {
	t.Helper()
	eventuallyFor(t, ctx, timeout, condition, msgAndArgs...)
}

// eventuallyFor is eventuallyWithin with a timeout of its own, for waits on what takes longer
// than the suite's timeout: a real cluster's controllers, a measured window.
func eventuallyFor(t *testing.T, ctx context.Context, wait time.Duration, condition func(a *attempt), msgAndArgs ...any) {
	t.Helper()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		condition(&attempt{CollectT: ct, ctx: ctx})
	}, wait, interval, msgAndArgs...)
}

// newNamespace creates a namespace on the management cluster, deleted when the test ends.
func newNamespace(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("e2e-%s-%d", strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")), nsCounter.Add(1))
	if len(name) > 56 { // room for the "-guest" of a hosted-control-plane namespace
		name = fmt.Sprintf("e2e-%d-%d", time.Now().UnixNano()%100000, nsCounter.Add(1))
	}
	createNamespace(t, suite.mgmtClient, name, nil)
	return name
}

// createNamespace creates a namespace on the management cluster and empties it when the test
// ends (see cleanNamespace).
func createNamespace(t *testing.T, c client.Client, name string, labels map[string]string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	require.NoError(t, c.Create(t.Context(), ns))
	t.Cleanup(func() { cleanNamespace(t, name) })
}

// namespacedKinds are the kinds tests and packages create in a management namespace, deleted
// by cleanNamespace once the pkgsync resources there are gone. Fresh lists on each call: tests
// clean their namespaces in parallel, and a list shared between them is decoded into at once.
func namespacedKinds() []client.ObjectList {
	return []client.ObjectList{
		&corev1.SecretList{}, &corev1.ConfigMapList{}, &corev1.ServiceAccountList{}, &rbacv1.RoleList{},
		&rbacv1.RoleBindingList{}, &appsv1.DeploymentList{}, hostedClusterList(),
	}
}

// cleanNamespace deletes what a test left in a management namespace and waits until it is
// gone: first the pkgsync resources, which the suite's controller tears down, then every other
// object, then the namespace itself. Resources with a shard label belong to a controller of
// the test's own, stopped by now (its cleanup was registered after the namespace's, so it ran
// first): the test deletes them while that controller runs (deleteAndWait), and any left here
// lose their finalizer, which no controller would remove. envtest runs no namespace
// controller, so the namespace stays Terminating and is not waited for; the hosted client of
// the namespace is dropped, so counters of hosted clients and probes see only later tests.
func cleanNamespace(t *testing.T, ns string) {
	t.Helper()
	ctx := context.WithoutCancel(t.Context())
	for _, list := range []client.ObjectList{&v1alpha1.PackageList{}, &v1alpha1.ObjectDeploymentList{}} {
		require.NoError(t, suite.mgmtClient.List(ctx, list, client.InNamespace(ns)))
		require.NoError(t, apimeta.EachListItem(list, func(o runtime.Object) error {
			obj := o.(client.Object)
			if _, sharded := obj.GetLabels()[shardLabel]; sharded && len(obj.GetFinalizers()) > 0 {
				patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
				obj.SetFinalizers(nil)
				require.NoError(t, client.IgnoreNotFound(suite.mgmtClient.Patch(ctx, obj, patch)))
			}
			deleteAndWait(t, obj)
			return nil
		}))
	}
	for _, list := range namespacedKinds() {
		obj := itemOf(t, list)
		require.NoError(t, client.IgnoreNotFound(suite.mgmtClient.DeleteAllOf(ctx, obj, client.InNamespace(ns))))
	}
	eventuallyWithin(t, ctx, func(a *attempt) {
		for _, list := range namespacedKinds() {
			if assert.NoError(a, suite.mgmtClient.List(ctx, list, client.InNamespace(ns))) {
				assert.Zero(a, apimeta.LenList(list), "%T left in namespace %s", list, ns)
			}
		}
	}, "objects of namespace %s deleted", ns)
	suite.hostedClients.Forget(ns)
	require.NoError(t, client.IgnoreNotFound(suite.mgmtClient.Delete(ctx, namespaceObj(ns))))
}

// updateObject writes change, made to a fresh read of obj, to the management cluster, and again
// on a fresh read when a controller wrote obj (its status, its finalizer) between the read and
// the write: a conflict that depends on how busy the controller is, not on what the test does.
func updateObject(t testingT, obj client.Object, change func(), opts ...client.UpdateOption) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		if err := suite.mgmtClient.Get(t.Context(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change()
		return suite.mgmtClient.Update(t.Context(), obj, opts...)
	}))
}

// deleteAndWait deletes a pkgsync resource, or any object, when the test ends and waits until
// it is gone. Namespaces its teardown deletes, on either cluster, are finalized on the way,
// as the namespace controller envtest lacks would.
func deleteAndWait(t *testing.T, obj client.Object) {
	t.Helper()
	ctx := context.WithoutCancel(t.Context())
	require.NoError(t, client.IgnoreNotFound(suite.mgmtClient.Delete(ctx, obj)))
	eventuallyWithin(t, ctx, func(a *attempt) {
		for _, cp := range []*testenv.ControlPlane{suite.mgmt, suite.hosted} {
			finalizeOwnedNamespaces(a, cp.Config, obj)
		}
		err := suite.mgmtClient.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		assert.True(a, apierrors.IsNotFound(err), "%T %s still there: %v", obj, client.ObjectKeyFromObject(obj), err)
	}, "deleted at the end of the test")
}

// deleteHostedNamespaceAtEnd deletes a namespace of the hosted cluster, and the objects
// inlineDeployment puts in it, when the test ends: for tests whose teardown cannot reach the
// hosted cluster, so that no later test finds them owned by a resource long gone.
func deleteHostedNamespaceAtEnd(t *testing.T, name string) {
	t.Helper()
	t.Cleanup(func() {
		ctx := context.WithoutCancel(t.Context())
		for _, obj := range []client.Object{&corev1.ConfigMap{}, &corev1.ServiceAccount{}} {
			require.NoError(t, suite.hostedClient.DeleteAllOf(ctx, obj, client.InNamespace(name)))
		}
		require.NoError(t, client.IgnoreNotFound(suite.hostedClient.Delete(ctx, namespaceObj(name))))
		eventuallyWithin(t, ctx, func(a *attempt) {
			finalizeNamespace(a, suite.hosted.Config, name)
			err := suite.hostedClient.Get(ctx, client.ObjectKey{Name: name}, &corev1.Namespace{})
			assert.True(a, apierrors.IsNotFound(err), "hosted namespace %s still there: %v", name, err)
		}, "hosted namespace %s deleted at the end of the test", name)
	})
}

// finalizeOwnedNamespaces finalizes the terminating namespaces of a cluster that carry the
// ownership labels of owner.
func finalizeOwnedNamespaces(t testingT, cfg *rest.Config, owner client.Object) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	selector := labels.SelectorFromSet(labels.Set{apply.LabelOwnerNamespace: owner.GetNamespace(), apply.LabelOwnerName: owner.GetName()})
	list, err := cs.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{LabelSelector: selector.String()})
	require.NoError(t, err)
	for _, ns := range list.Items {
		finalizeNamespace(t, cfg, ns.Name)
	}
}

// hostedClusterList is a list of HyperShift HostedClusters, whose types pkgsync does not import.
func hostedClusterList() *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(hosted.HostedClusterGVK.GroupVersion().WithKind(hosted.HostedClusterGVK.Kind + "List"))
	return l
}

// itemOf returns an empty object of the kind a list holds.
func itemOf(t *testing.T, list client.ObjectList) client.Object {
	t.Helper()
	if u, ok := list.(*unstructured.UnstructuredList); ok {
		item := &unstructured.Unstructured{}
		item.SetGroupVersionKind(u.GroupVersionKind().GroupVersion().WithKind(strings.TrimSuffix(u.GetKind(), "List")))
		return item
	}
	gvk, err := apiutil.GVKForObject(list, suite.scheme)
	require.NoError(t, err)
	obj, err := suite.scheme.New(gvk.GroupVersion().WithKind(strings.TrimSuffix(gvk.Kind, "List")))
	require.NoError(t, err)
	return obj.(client.Object)
}

// newHCPNamespace makes a hosted-control-plane namespace, with an Available HostedCluster
// behind it, whose connector Secret reaches the hosted control plane as user.
func newHCPNamespace(t *testing.T, user string) string {
	t.Helper()
	_, hcp := newHostedControlPlane(t, user, true)
	return hcp
}

// putConnectorSecret writes the connector Secret of namespace. HyperShift writes it and the
// HostedCluster's status.controlPlaneEndpoint in step; so here the HostedCluster behind the
// namespace, if any, first advertises the kubeconfig's server (the suite's hosted control plane,
// or the proxy or dead address a test stands in for it), which pkgsync requires of the server.
// TestConnectorServerElsewhereRefused writes a Secret without it.
func putConnectorSecret(t *testing.T, namespace string, kubeconfig []byte) {
	t.Helper()
	advertiseServer(t, namespace, kubeconfig)
	writeConnectorSecret(t, namespace, kubeconfig)
}

// advertiseServer sets status.controlPlaneEndpoint of the HostedCluster behind namespace to the
// server of kubeconfig, when there are both.
func advertiseServer(t *testing.T, namespace string, kubeconfig []byte) {
	t.Helper()
	endpoint := endpointOf(kubeconfig)
	if endpoint == nil {
		return // a kubeconfig the test breaks on purpose
	}
	list := hostedClusterList()
	require.NoError(t, suite.mgmtClient.List(t.Context(), list))
	for i := range list.Items {
		hc := &list.Items[i]
		if hosted.ControlPlaneNamespace(hc.GetNamespace(), hc.GetName()) != namespace {
			continue
		}
		require.NoError(t, unstructured.SetNestedField(hc.Object, endpoint, "status", "controlPlaneEndpoint"))
		require.NoError(t, suite.mgmtClient.Status().Update(t.Context(), hc))
	}
}

// writeConnectorSecret writes the connector Secret of namespace as HyperShift does, with
// kubeconfig as it is.
func writeConnectorSecret(t *testing.T, namespace string, kubeconfig []byte) {
	t.Helper()
	secret := testenv.ConnectorSecret(namespace, kubeconfig)
	err := suite.mgmtClient.Create(t.Context(), secret)
	if apierrors.IsAlreadyExists(err) {
		err = suite.mgmtClient.Update(t.Context(), secret)
	}
	require.NoError(t, err)
}

// pushPackage builds dir and pushes it to the suite's registry under repo:tag.
func pushPackage(t *testing.T, dir, repoTag string) string {
	t.Helper()
	return pushPackageTo(t, dir, suite.registry.Host+"/"+repoTag)
}

// pushPackageTo builds dir and pushes it to the image reference given.
func pushPackageTo(t *testing.T, dir, image string) string {
	t.Helper()
	img, err := source.Build(dir, source.BuildOptions{})
	require.NoError(t, err)
	ref, err := source.ParseReference(image)
	require.NoError(t, err)
	_, err = suite.source.Push(t.Context(), img, []source.Reference{ref}, nil)
	require.NoError(t, err)
	return img.Digest
}

// writePackage writes a package tree from path → content.
func writePackage(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		path := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	}
	return dir
}

// markDeploymentAvailable plays kube-controller-manager for one Deployment.
func markDeploymentAvailable(t *testing.T, c client.Client, namespace, name string) {
	t.Helper()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		var d appsv1.Deployment
		if !assert.NoError(ct, c.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: name}, &d)) {
			return
		}
		replicas := int32(1)
		if d.Spec.Replicas != nil {
			replicas = *d.Spec.Replicas
		}
		d.Status = appsv1.DeploymentStatus{
			ObservedGeneration: d.Generation, Replicas: replicas, UpdatedReplicas: replicas,
			ReadyReplicas: replicas, AvailableReplicas: replicas,
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now()},
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now()},
			},
		}
		assert.NoError(ct, c.Status().Update(t.Context(), &d))
	}, timeout, interval)
}

// readyCondition reads a pkgsync resource into obj and returns its Ready condition, nil when
// it has none.
func readyCondition(t testingT, obj client.Object) *metav1.Condition {
	t.Helper()
	return readyConditionOn(t, suite.mgmtClient, obj)
}

// readyConditionOn is readyCondition on the cluster of c.
func readyConditionOn(t testingT, c client.Client, obj client.Object) *metav1.Condition {
	t.Helper()
	require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(obj), obj))
	getter, ok := obj.(interface{ GetConditions() []metav1.Condition })
	require.True(t, ok)
	return apimeta.FindStatusCondition(getter.GetConditions(), meta.ReadyCondition)
}

// waitForReady waits until Ready has status and reason.
func waitForReady(t *testing.T, obj client.Object, status metav1.ConditionStatus, reason string) *metav1.Condition {
	t.Helper()
	return waitForReadyMessage(t, obj, status, reason, "")
}

// waitForReadyMessage waits until Ready has the status and reason and its message contains text.
func waitForReadyMessage(t *testing.T, obj client.Object, status metav1.ConditionStatus, reason, text string) *metav1.Condition {
	t.Helper()
	return waitForReadyOn(t, suite.mgmtClient, timeout, obj, status, reason, text)
}

// waitForReadyOn is waitForReadyMessage on the cluster of c, waiting at most wait.
func waitForReadyOn(t *testing.T, c client.Client, wait time.Duration, obj client.Object, status metav1.ConditionStatus, reason, text string) *metav1.Condition {
	t.Helper()
	var last *metav1.Condition
	eventuallyFor(t, t.Context(), wait, func(a *attempt) {
		last = readyConditionOn(a, c, obj)
		if assert.NotNil(a, last, "no Ready condition yet") {
			assert.Equal(a, status, last.Status, "Ready: %s", last.Message)
			assert.Equal(a, reason, last.Reason, "Ready: %s", last.Message)
			assert.Contains(a, last.Message, text)
		}
	}, "%T %s Ready=%s %s", obj, client.ObjectKeyFromObject(obj), status, reason)
	return last
}

// exists reports whether an object exists on a cluster.
func exists(t testingT, c client.Client, apiVersion, kind, namespace, name string) bool {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	err := c.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: name}, u)
	if apierrors.IsNotFound(err) {
		return false
	}
	require.NoError(t, err)
	return true
}

// ownerLabel is the label naming the owning resource.
const ownerLabel = apply.LabelOwnerName

func configMap(namespace, name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
}

func namespaceObj(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// hostOf returns host:port of a rest.Config's server.
func hostOf(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	u, err := url.Parse(cfg.Host)
	require.NoError(t, err)
	return u.Host
}

// rewriteServer points a kubeconfig at another server URL.
func rewriteServer(t *testing.T, kubeconfig []byte, server string) []byte {
	t.Helper()
	cfg, err := clientcmd.Load(kubeconfig)
	require.NoError(t, err)
	for _, c := range cfg.Clusters {
		c.Server = server
	}
	out, err := clientcmd.Write(*cfg)
	require.NoError(t, err)
	return out
}

// finalizeNamespace plays the namespace controller, which envtest lacks: once a namespace is
// terminating and empty of our objects, its kubernetes finalizer is removed so it goes. It
// works in cleanups too, which run after the test's context has ended.
func finalizeNamespace(t testingT, cfg *rest.Config, name string) {
	t.Helper()
	ctx := context.WithoutCancel(t.Context())
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	ns, err := cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return
	}
	require.NoError(t, err)
	if ns.DeletionTimestamp.IsZero() || len(ns.Spec.Finalizers) == 0 {
		return
	}
	ns.Spec.Finalizers = nil
	_, err = cs.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{})
	if !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		require.NoError(t, err)
	}
}

func clientKey(obj client.Object) client.ObjectKey { return client.ObjectKeyFromObject(obj) }
