package e2e

import (
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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/source"
	"pkgsync.dev/pkgsync/test/testenv"
)

var nsCounter atomic.Int32

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

func createNamespace(t *testing.T, c client.Client, name string, labels map[string]string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	require.NoError(t, c.Create(t.Context(), ns))
}

// newHCPNamespace makes a hosted-control-plane namespace, with an Available HostedCluster
// behind it, whose connector Secret reaches the hosted control plane as user.
func newHCPNamespace(t *testing.T, user string) string {
	t.Helper()
	_, hcp := newHostedControlPlane(t, user, true)
	return hcp
}

func putConnectorSecret(t *testing.T, namespace string, kubeconfig []byte) {
	t.Helper()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: hosted.DefaultSecretName, Namespace: namespace},
		Data:       map[string][]byte{hosted.DefaultSecretKey: kubeconfig},
	}
	err := suite.mgmtClient.Create(t.Context(), secret)
	if apierrors.IsAlreadyExists(err) {
		err = suite.mgmtClient.Update(t.Context(), secret)
	}
	require.NoError(t, err)
}

// pushPackage builds dir and pushes it to the suite's registry under repo:tag.
func pushPackage(t *testing.T, dir, repoTag string) string {
	t.Helper()
	img, err := source.Build(dir, source.BuildOptions{})
	require.NoError(t, err)
	ref, err := source.ParseReference(suite.registry.Host + "/" + repoTag)
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

// readyCondition returns the Ready condition of a pkgsync resource, nil when it has none.
func readyCondition(t *testing.T, obj client.Object) *metav1.Condition {
	t.Helper()
	require.NoError(t, suite.mgmtClient.Get(t.Context(), client.ObjectKeyFromObject(obj), obj))
	getter, ok := obj.(interface{ GetConditions() []metav1.Condition })
	require.True(t, ok)
	return apimeta.FindStatusCondition(getter.GetConditions(), meta.ReadyCondition)
}

// waitForReady waits until Ready has status and reason.
func waitForReady(t *testing.T, obj client.Object, status metav1.ConditionStatus, reason string) *metav1.Condition {
	t.Helper()
	var last *metav1.Condition
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		last = readyCondition(t, obj)
		if assert.NotNil(ct, last, "no Ready condition yet") {
			assert.Equal(ct, status, last.Status, "Ready: %s", last.Message)
			assert.Equal(ct, reason, last.Reason, "Ready: %s", last.Message)
		}
	}, timeout, interval)
	return last
}

// exists reports whether an object exists on a cluster.
func exists(t *testing.T, c client.Client, apiVersion, kind, namespace, name string) bool {
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

var _ = testenv.RegistryEnv

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
// terminating and empty of our objects, its kubernetes finalizer is removed so it goes.
func finalizeNamespace(t *testing.T, cfg *rest.Config, name string) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	ns, err := cs.CoreV1().Namespaces().Get(t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return
	}
	require.NoError(t, err)
	if ns.DeletionTimestamp.IsZero() || len(ns.Spec.Finalizers) == 0 {
		return
	}
	ns.Spec.Finalizers = nil
	_, err = cs.CoreV1().Namespaces().Finalize(t.Context(), ns, metav1.UpdateOptions{})
	if !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		require.NoError(t, err)
	}
}

func clientKey(obj client.Object) client.ObjectKey { return client.ObjectKeyFromObject(obj) }
