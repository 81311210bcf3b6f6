package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/test/testenv"
)

// newHostedCluster creates a HostedCluster and its hosted-control-plane namespace with a
// connector Secret, as HyperShift does, and returns the HostedCluster and that namespace.
func newHostedCluster(t *testing.T, available bool) (*unstructured.Unstructured, string) {
	t.Helper()
	return newHostedControlPlane(t, "", available)
}

// newHostedControlPlane creates a HostedCluster and its hosted-control-plane namespace with the
// HostedControlPlane and connector Secret HyperShift keeps there, the connector reaching the
// hosted control plane as user (derived from the namespace when empty): each object as
// HyperShift's CLI and operators write it (testenv.HostedCluster and the like).
func newHostedControlPlane(t *testing.T, user string, available bool) (*unstructured.Unstructured, string) {
	t.Helper()
	hcNamespace := newNamespace(t)
	hc := testenv.HostedCluster(hcNamespace, "guest")
	require.NoError(t, suite.mgmtClient.Create(t.Context(), hc))
	setHostedClusterAvailable(t, hc, available)

	hcp := hosted.ControlPlaneNamespace(hcNamespace, "guest")
	createNamespace(t, suite.mgmtClient, hcp, map[string]string{"hypershift.openshift.io/hosted-control-plane": "true"})
	require.NoError(t, suite.mgmtClient.Create(t.Context(), testenv.HostedControlPlane(hc, hcp)))
	if user == "" {
		user = "hcp-" + hcp
	}
	kubeconfig, err := suite.hosted.ConnectorKubeconfig(user)
	require.NoError(t, err)
	putConnectorSecret(t, hcp, kubeconfig)
	return hc, hcp
}

// setHostedClusterAvailable sets the Available condition as HyperShift's operator does, keeping
// the others.
func setHostedClusterAvailable(t *testing.T, hc *unstructured.Unstructured, available bool) {
	t.Helper()
	message := "The hosted control plane is available"
	if !available {
		message = "Waiting for hosted control plane to be healthy"
	}
	setHostedClusterConditions(t, hc, testenv.Condition("Available", available, message, 0))
}

// setHostedClusterConditions writes conditions into the HostedCluster's status, replacing those
// of the same types (status.conditions is a list keyed by type), each observing the
// HostedCluster's current generation.
func setHostedClusterConditions(t *testing.T, hc *unstructured.Unstructured, conditions ...map[string]any) {
	t.Helper()
	require.NoError(t, suite.mgmtClient.Get(t.Context(), client.ObjectKeyFromObject(hc), hc))
	existing, _, err := unstructured.NestedSlice(hc.Object, "status", "conditions")
	require.NoError(t, err)
	for _, c := range conditions {
		c["observedGeneration"] = hc.GetGeneration()
		replaced := false
		for i, e := range existing {
			if e.(map[string]any)["type"] == c["type"] {
				existing[i], replaced = c, true
			}
		}
		if !replaced {
			existing = append(existing, c)
		}
	}
	require.NoError(t, unstructured.SetNestedSlice(hc.Object, existing, "status", "conditions"))
	require.NoError(t, suite.mgmtClient.Status().Update(t.Context(), hc))
}

// TestHostedAddonAcrossClusters installs packages-example/hosted-addon: RBAC in the hosted
// cluster, the operator on the management cluster, configuration in the hosted cluster.
func TestHostedAddonAcrossClusters(t *testing.T) {
	t.Parallel()
	hc, hcp := newHostedCluster(t, false)
	pushPackage(t, "../../packages-example/hosted-addon", "e2e/hosted-addon:v1")
	pkg := newPackage(hcp, "addon", suite.registry.Host+"/e2e/hosted-addon:v1", `{"hostedNamespace":"addon-e2e","greeting":"hi"}`)
	require.NoError(t, suite.mgmtClient.Create(t.Context(), pkg))

	cond := waitForReady(t, pkg, metav1.ConditionFalse, v1alpha1.HostedClusterUnavailableReason)
	assert.Contains(t, cond.Message, "is not Available")
	assert.False(t, exists(t, suite.hostedClient, "v1", "Namespace", "", "addon-e2e"), "hosted phase waits for the HostedCluster")

	setHostedClusterAvailable(t, hc, true)
	eventually(t, func(a *attempt) {
		readyCondition(a, pkg)
		assert.Equal(a, "deploy", pkg.Status.Phase)
	})
	assert.True(t, exists(t, suite.hostedClient, "v1", "Namespace", "", "addon-e2e"), "phase 1 is in the hosted cluster")
	assert.True(t, exists(t, suite.hostedClient, "rbac.authorization.k8s.io/v1", "ClusterRole", "", "hosted-addon-operator"))
	assert.True(t, exists(t, suite.mgmtClient, "apps/v1", "Deployment", hcp, "addon-operator"), "phase 2 is on the management cluster")
	assert.False(t, exists(t, suite.mgmtClient, "v1", "Namespace", "", "addon-e2e"), "hosted objects do not land on the management cluster")
	assert.False(t, exists(t, suite.hostedClient, "v1", "ConfigMap", "addon-e2e", "hosted-addon-config"), "phase 3 waits for phase 2")

	markDeploymentAvailable(t, suite.mgmtClient, hcp, "addon-operator")
	waitForReady(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	assert.True(t, exists(t, suite.hostedClient, "v1", "ConfigMap", "addon-e2e", "hosted-addon-config"))
	eventually(t, func(a *attempt) {
		readyCondition(a, pkg)
		if assert.Len(a, pkg.Status.Phases, 3) {
			assert.Equal(a, v1alpha1.ClassHostedCluster, pkg.Status.Phases[0].Class)
			assert.Equal(a, "", pkg.Status.Phases[1].Class)
		}
	})

	// Teardown runs in reverse phase order across clusters: a finalizer holds the hosted
	// configuration (phase 3), and the management Deployment (phase 2) must wait for it.
	hostedConfig := configMap("addon-e2e", "hosted-addon-config")
	require.NoError(t, suite.hostedClient.Get(t.Context(), client.ObjectKeyFromObject(hostedConfig), hostedConfig))
	hostedConfig.Finalizers = append(hostedConfig.Finalizers, "e2e.pkgsync.dev/hold")
	require.NoError(t, suite.hostedClient.Update(t.Context(), hostedConfig))
	require.NoError(t, suite.mgmtClient.Delete(t.Context(), pkg))
	eventually(t, func(a *attempt) {
		require.NoError(a, suite.hostedClient.Get(a.Context(), client.ObjectKeyFromObject(hostedConfig), hostedConfig))
		assert.False(a, hostedConfig.DeletionTimestamp.IsZero(), "phase configure is being deleted")
	})
	cond = readyCondition(t, pkg)
	require.NotNil(t, cond)
	assert.Contains(t, cond.Message, "deleting phase configure")
	assert.True(t, exists(t, suite.mgmtClient, "apps/v1", "Deployment", hcp, "addon-operator"), "phase 2 waits until phase 3 is gone")
	hostedConfig.Finalizers = nil
	require.NoError(t, suite.hostedClient.Update(t.Context(), hostedConfig))

	eventually(t, func(a *attempt) {
		finalizeNamespace(a, suite.hosted.Config, "addon-e2e")
		err := suite.mgmtClient.Get(a.Context(), client.ObjectKeyFromObject(pkg), pkg)
		assert.True(a, apierrors.IsNotFound(err), "Package still there: %v", err)
	})
	assert.False(t, exists(t, suite.hostedClient, "v1", "ConfigMap", "addon-e2e", "hosted-addon-config"))
	assert.False(t, exists(t, suite.mgmtClient, "apps/v1", "Deployment", hcp, "addon-operator"))
	assert.False(t, exists(t, suite.hostedClient, "rbac.authorization.k8s.io/v1", "ClusterRole", "", "hosted-addon-operator"))
}

// inlineDeployment is the §0 example as an ObjectDeployment: hosted namespace + config map,
// a management config map, hosted configuration.
func inlineDeployment(t *testing.T, namespace, name, hostedNamespace string) *v1alpha1.ObjectDeployment {
	t.Helper()
	obj := func(apiVersion, kind, ns, n string) v1alpha1.ObjectSetObject {
		u := map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"name": n}}
		if ns != "" {
			u["metadata"].(map[string]any)["namespace"] = ns
		}
		if kind == "ConfigMap" {
			u["data"] = map[string]any{"owner": namespace + "/" + name}
		}
		raw, err := (&unstructured.Unstructured{Object: u}).MarshalJSON()
		require.NoError(t, err)
		return v1alpha1.ObjectSetObject{Object: runtime.RawExtension{Raw: raw}}
	}
	return &v1alpha1.ObjectDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: v1alpha1.ObjectDeploymentSpec{Template: v1alpha1.ObjectSetTemplate{Spec: v1alpha1.ObjectSetTemplateSpec{
			Phases: []v1alpha1.ObjectSetPhase{
				{Name: "rbac-and-stuff", Class: v1alpha1.ClassHostedCluster, Objects: []v1alpha1.ObjectSetObject{
					obj("v1", "Namespace", "", hostedNamespace), obj("v1", "ServiceAccount", hostedNamespace, "addon"),
				}},
				{Name: "deploy", Objects: []v1alpha1.ObjectSetObject{obj("v1", "ConfigMap", namespace, name+"-operator")}},
				{Name: "configure", Class: v1alpha1.ClassHostedCluster, Objects: []v1alpha1.ObjectSetObject{
					obj("v1", "ConfigMap", hostedNamespace, "settings"),
				}},
			},
		}}},
	}
}

func TestObjectDeploymentsInManyHCPNamespaces(t *testing.T) {
	// Not parallel: it counts the hosted clients the shared controller builds, for every namespace.
	const n = 20
	_, buildsBefore := suite.hostedClients.Stats()
	ods := make([]*v1alpha1.ObjectDeployment, n)
	for i := range ods {
		hcp := newHCPNamespace(t, fmt.Sprintf("many-%d", i))
		ods[i] = inlineDeployment(t, hcp, "inline", fmt.Sprintf("many-%d", i))
		require.NoError(t, suite.mgmtClient.Create(t.Context(), ods[i]))
	}
	for i, od := range ods {
		waitForReady(t, od, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
		assert.True(t, exists(t, suite.hostedClient, "v1", "ConfigMap", fmt.Sprintf("many-%d", i), "settings"))
		assert.True(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", od.Namespace, "inline-operator"))
	}
	_, buildsAfter := suite.hostedClients.Stats()
	assert.Equal(t, n, buildsAfter-buildsBefore, "one hosted client per hosted-control-plane namespace, built once")
}

func TestHostedCredentialRotation(t *testing.T) {
	// Not parallel: it counts the hosted clients the shared controller builds, for every namespace.
	hcp := newHCPNamespace(t, "rotation-a")
	od := inlineDeployment(t, hcp, "rotating", "rotation")
	require.NoError(t, suite.mgmtClient.Create(t.Context(), od))
	waitForReady(t, od, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	_, builds := suite.hostedClients.Stats()

	// HyperShift renews the client certificate: the Secret gets a new kubeconfig. The watch on
	// the Secret alone must bring the new client into use, no restart and no request.
	require.NoError(t, suite.hostedClient.Delete(t.Context(), configMap("rotation", "settings")))
	kubeconfig, err := suite.hosted.ConnectorKubeconfig("rotation-b")
	require.NoError(t, err)
	putConnectorSecret(t, hcp, kubeconfig)
	eventually(t, func(a *attempt) {
		assert.True(a, exists(a, suite.hostedClient, "v1", "ConfigMap", "rotation", "settings"), "settings restored with the new credentials")
	})
	_, buildsAfter := suite.hostedClients.Stats()
	assert.Equal(t, builds+1, buildsAfter, "the client is rebuilt once for the new credentials")
}

func TestHostedClusterUnreachableRecovers(t *testing.T) {
	t.Parallel()
	_, hcp := newHostedControlPlane(t, "", true)
	proxy := startProxy(t, hostOf(t, suite.hosted.Config))
	kubeconfig, err := suite.hosted.ConnectorKubeconfig("unreachable")
	require.NoError(t, err)
	putConnectorSecret(t, hcp, rewriteServer(t, kubeconfig, "https://"+proxy.addr))

	od := inlineDeployment(t, hcp, "flaky", "flaky")
	require.NoError(t, suite.mgmtClient.Create(t.Context(), od))
	t.Cleanup(func() { deleteAndWait(t, od) }) // while the proxy still answers: it stops after
	waitForReady(t, od, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)

	proxy.stop()
	requestReconcile(t, od)
	cond := waitForReady(t, od, metav1.ConditionFalse, v1alpha1.HostedClusterUnavailableReason)
	assert.Contains(t, cond.Message, "hosted cluster")
	assert.True(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", hcp, "flaky-operator"), "nothing is torn down")

	proxy.start(t)
	waitForReady(t, od, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
}

func TestTeardownWhenNamespaceTerminates(t *testing.T) {
	t.Parallel()
	hcp := newHCPNamespace(t, "terminating")
	od := inlineDeployment(t, hcp, "leaving", "leaving")
	deleteHostedNamespaceAtEnd(t, "leaving") // the teardown cannot reach it
	require.NoError(t, suite.mgmtClient.Create(t.Context(), od))
	waitForReady(t, od, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)

	// HyperShift removes the hosted API server first, then the namespace.
	kubeconfig, err := suite.hosted.ConnectorKubeconfig("terminating-gone")
	require.NoError(t, err)
	putConnectorSecret(t, hcp, rewriteServer(t, kubeconfig, "https://127.0.0.1:1"))
	require.NoError(t, suite.mgmtClient.Delete(t.Context(), namespaceObj(hcp)))
	require.NoError(t, suite.mgmtClient.Delete(t.Context(), od))
	eventually(t, func(a *attempt) {
		err := suite.mgmtClient.Get(a.Context(), client.ObjectKeyFromObject(od), od)
		assert.True(a, apierrors.IsNotFound(err), "ObjectDeployment still there: %v", err)
	}, "deletion must not hang on an unreachable hosted cluster")
	assert.False(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", hcp, "leaving-operator"), "management objects are still removed")
}

// tcpProxy forwards a loopback port to the hosted API server and can stop answering.
type tcpProxy struct {
	addr, target string
	mu           sync.Mutex
	listener     net.Listener
	conns        []net.Conn
}

func startProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	p := &tcpProxy{target: target}
	p.start(t)
	t.Cleanup(p.stop)
	return p
}

func (p *tcpProxy) start(t *testing.T) {
	t.Helper()
	addr := p.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var l net.Listener
	eventually(t, func(a *attempt) { // the port of the stopped listener may take a moment to free
		var err error
		l, err = net.Listen("tcp", addr)
		assert.NoError(a, err)
	})
	p.mu.Lock()
	p.listener, p.addr = l, l.Addr().String()
	p.mu.Unlock()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			up, err := (&net.Dialer{}).DialContext(context.Background(), "tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
}

// stop closes the listener and every open connection: the API server is gone.
func (p *tcpProxy) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.listener != nil {
		p.listener.Close()
		p.listener = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

var _ = testenv.KubeconfigFor

// TestPausedHostedClusterHoldsHostedPhases: while HyperShift's reconciliation of a HostedCluster
// is paused, hosted phases wait; resuming it lets them go on, without a reconcile request.
func TestPausedHostedClusterHoldsHostedPhases(t *testing.T) {
	t.Parallel()
	hc, hcp := newHostedControlPlane(t, "", true)
	setHostedClusterPaused(t, hc, true)
	od := inlineDeployment(t, hcp, "paused", "paused-addon")
	require.NoError(t, suite.mgmtClient.Create(t.Context(), od))
	cond := waitForReady(t, od, metav1.ConditionFalse, v1alpha1.HostedClusterUnavailableReason)
	assert.Contains(t, cond.Message, "paused")
	assert.False(t, exists(t, suite.hostedClient, "v1", "Namespace", "", "paused-addon"), "nothing reaches the paused cluster")

	setHostedClusterPaused(t, hc, false)
	waitForReady(t, od, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	assert.True(t, exists(t, suite.hostedClient, "v1", "ConfigMap", "paused-addon", "settings"))
}

// setHostedClusterPaused sets ReconciliationActive as HyperShift's operator does for
// spec.pausedUntil, keeping Available=True.
func setHostedClusterPaused(t *testing.T, hc *unstructured.Unstructured, paused bool) {
	t.Helper()
	message := "Reconciliation active on resource"
	if paused {
		message = "Reconciliation paused until: true"
	}
	setHostedClusterConditions(t, hc, testenv.Condition("Available", true, "The hosted control plane is available", 0),
		testenv.Condition("ReconciliationActive", !paused, message, 0))
}

// TestPausedUntilHoldsHostedPhases: spec.pausedUntil alone pauses a cluster, as HyperShift reads
// it, before its operator writes ReconciliationActive=False (or while that operator is down):
// "true" until the field is removed, a time until then, after which the phases go on by
// themselves.
func TestPausedUntilHoldsHostedPhases(t *testing.T) {
	// Not parallel: the controller must report a pause of 5 seconds before it ends, which it may
	// not on a busy machine.
	hc, hcp := newHostedControlPlane(t, "", true)
	setPausedUntil(t, hc, "true")
	od := inlineDeployment(t, hcp, "paused-until", "paused-until-addon")
	require.NoError(t, suite.mgmtClient.Create(t.Context(), od))
	waitForReadyMessage(t, od, metav1.ConditionFalse, v1alpha1.HostedClusterUnavailableReason, `paused (spec.pausedUntil: "true")`)
	assert.False(t, exists(t, suite.hostedClient, "v1", "Namespace", "", "paused-until-addon"), "nothing reaches the paused cluster")

	until := time.Now().Add(5 * time.Second).UTC().Format(time.RFC3339)
	setPausedUntil(t, hc, until)
	waitForReadyMessage(t, od, metav1.ConditionFalse, v1alpha1.HostedClusterUnavailableReason, "paused until "+until)
	assert.False(t, exists(t, suite.hostedClient, "v1", "Namespace", "", "paused-until-addon"), "nothing reaches the paused cluster")
	// Nothing else changes: the time passing ends the pause.
	waitForReady(t, od, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	assert.True(t, exists(t, suite.hostedClient, "v1", "ConfigMap", "paused-until-addon", "settings"))
}

// setPausedUntil writes spec.pausedUntil as a HostedCluster's owner does, leaving its conditions
// (Available=True, no ReconciliationActive) as they are.
func setPausedUntil(t *testing.T, hc *unstructured.Unstructured, value string) {
	t.Helper()
	require.NoError(t, suite.mgmtClient.Get(t.Context(), client.ObjectKeyFromObject(hc), hc))
	require.NoError(t, unstructured.SetNestedField(hc.Object, value, "spec", "pausedUntil"))
	require.NoError(t, suite.mgmtClient.Update(t.Context(), hc))
}
