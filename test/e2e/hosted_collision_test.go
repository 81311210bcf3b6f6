package e2e

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/test/testenv"
)

// hostedWavePackage is a package with one hosted-cluster phase: a ConfigMap in the hosted
// cluster's namespace default that shows the wave label of the HostedCluster behind the
// Package's namespace.
func hostedWavePackage(t *testing.T, repoTag string) string {
	t.Helper()
	dir := writePackage(t, map[string]string{
		"manifest.yaml": `apiVersion: pkgsync.dev/v1alpha1
kind: PackageManifest
metadata:
  name: hosted-wave
spec:
  scopes:
  - Namespaced
  phases:
  - name: hosted
    class: hosted-cluster
  config:
    openAPIV3Schema:
      type: object
      properties:
        name:
          type: string
`,
		"wave.yaml.gotmpl": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .config.name }}
  namespace: default
  annotations:
    pkgsync.dev/phase: hosted
data:
  wave: {{ index .environment.hyperShift.hostedCluster.metadata.labels "wave" | default "none" | quote }}
`,
	})
	pushPackage(t, dir, repoTag)
	return suite.registry.Host + "/" + repoTag
}

// newNamedHostedCluster creates an Available HostedCluster namespace/name with labels.
func newNamedHostedCluster(t *testing.T, namespace, name string, labels map[string]string) *unstructured.Unstructured {
	t.Helper()
	hc := testenv.HostedCluster(namespace, name)
	hc.SetLabels(labels)
	require.NoError(t, suite.mgmtClient.Create(t.Context(), hc))
	setHostedClusterAvailable(t, hc, true)
	return hc
}

// newHostedControlPlaneObject creates the HostedControlPlane HyperShift keeps in a
// hosted-control-plane namespace for the HostedCluster cluster (<namespace>/<name>).
func newHostedControlPlaneObject(t *testing.T, namespace, cluster string) {
	t.Helper()
	hcNamespace, name, ok := strings.Cut(cluster, "/")
	require.True(t, ok, "cluster %q is <namespace>/<name>", cluster)
	hcp := testenv.HostedControlPlane(testenv.HostedCluster(hcNamespace, name), namespace)
	require.NoError(t, suite.mgmtClient.Create(t.Context(), hcp))
	t.Cleanup(func() { _ = client.IgnoreNotFound(suite.mgmtClient.Delete(context.WithoutCancel(t.Context()), hcp)) })
}

// TestHostedClusterNameCollision: HostedClusters a-x/b and a/x-b both map to namespace a-x-b.
// Without a HostedControlPlane there naming one, a Package with a hosted phase is refused
// (NotHostedControlPlane, both named) and nothing reaches the hosted cluster; once HyperShift's
// HostedControlPlane names one, the Package renders with that one's labels, never the other's.
func TestHostedClusterNameCollision(t *testing.T) {
	t.Parallel()
	base := newNamespace(t)
	createNamespace(t, suite.mgmtClient, base+"-x", nil)
	newNamedHostedCluster(t, base+"-x", "b", map[string]string{"wave": "first"})
	newNamedHostedCluster(t, base, "x-b", map[string]string{"wave": "second"})
	hcp := base + "-x-b"
	require.Equal(t, hcp, hosted.ControlPlaneNamespace(base+"-x", "b"))
	require.Equal(t, hcp, hosted.ControlPlaneNamespace(base, "x-b"))
	createNamespace(t, suite.mgmtClient, hcp, map[string]string{"hypershift.openshift.io/hosted-control-plane": "true"})
	kubeconfig, err := suite.hosted.ConnectorKubeconfig("collision-" + hcp)
	require.NoError(t, err)
	putConnectorSecret(t, hcp, kubeconfig)

	cmName := "wave-" + base
	pkg := newPackage(hcp, "wave", hostedWavePackage(t, "e2e/"+hcp+"/hosted-wave:v1"), `{"name":"`+cmName+`"}`)
	require.NoError(t, suite.mgmtClient.Create(t.Context(), pkg))
	cond := waitForReady(t, pkg, metav1.ConditionFalse, v1alpha1.NotHostedControlPlaneReason)
	assert.Contains(t, cond.Message, base+"-x/b")
	assert.Contains(t, cond.Message, base+"/x-b")
	assert.False(t, exists(t, suite.hostedClient, "v1", "ConfigMap", "default", cmName), "nothing reaches the hosted cluster")

	newHostedControlPlaneObject(t, hcp, base+"/x-b")
	requestReconcile(t, pkg) // a refused resource is looked at again at its interval
	waitForReady(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	var cm corev1.ConfigMap
	require.NoError(t, suite.hostedClient.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: cmName}, &cm))
	assert.Equal(t, "second", cm.Data["wave"], "the labels of the HostedCluster the HostedControlPlane names")
}

// TestFleetMemberCollision: a fleet selecting both a-x/b and a/x-b writes no member into their
// shared namespace while nothing tells which one owns it, and reports the collision naming both;
// once the HostedControlPlane names one, that one's member is written.
func TestFleetMemberCollision(t *testing.T) {
	t.Parallel()
	base := newNamespace(t)
	createNamespace(t, suite.mgmtClient, base+"-x", nil)
	fleetKey := base
	newNamedHostedCluster(t, base+"-x", "b", map[string]string{"e2e.pkgsync.dev/fleet": fleetKey})
	newNamedHostedCluster(t, base, "x-b", map[string]string{"e2e.pkgsync.dev/fleet": fleetKey})
	hcp := base + "-x-b"
	createNamespace(t, suite.mgmtClient, hcp, map[string]string{"hypershift.openshift.io/hosted-control-plane": "true"})
	pushPackage(t, writePackage(t, fleetPackage("1", false)), "e2e/fleet-collision:v1")
	fleet := &v1alpha1.HostedClusterPackage{
		ObjectMeta: metav1.ObjectMeta{Name: "collide-" + base},
		Spec: v1alpha1.HostedClusterPackageSpec{
			HostedClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"e2e.pkgsync.dev/fleet": fleetKey}},
			Template: v1alpha1.PackageTemplate{Spec: v1alpha1.PackageSpec{
				Image: suite.registry.Host + "/e2e/fleet-collision:v1", Interval: &metav1.Duration{Duration: time.Hour}}},
		},
	}
	newFleet(t, fleet)
	eventually(t, func(a *attempt) {
		if !assert.NoError(a, suite.mgmtClient.Get(a.Context(), client.ObjectKeyFromObject(fleet), fleet)) {
			return
		}
		var found []string
		for _, m := range fleet.Status.FailedMembers {
			if m.Namespace == hcp && m.Reason == v1alpha1.CollisionReason {
				found = append(found, m.Message)
			}
		}
		if assert.NotEmpty(a, found, "the collision is reported") {
			assert.Contains(a, found[0], base+"-x/b")
			assert.Contains(a, found[0], base+"/x-b")
		}
	})
	assert.False(t, exists(t, suite.mgmtClient, v1alpha1.GroupVersion.String(), v1alpha1.PackageKind, hcp, fleet.Name), "no member is written while the owner is unknown")

	newHostedControlPlaneObject(t, hcp, base+"-x/b")
	requestFleetReconcile(t, fleet)
	eventually(t, func(a *attempt) {
		member := &v1alpha1.Package{}
		if assert.NoError(a, suite.mgmtClient.Get(a.Context(), client.ObjectKey{Namespace: hcp, Name: fleet.Name}, member)) {
			assert.Equal(a, fleet.Name, member.Labels[v1alpha1.FleetLabel])
		}
		assert.NoError(a, suite.mgmtClient.Get(a.Context(), client.ObjectKeyFromObject(fleet), fleet))
		for _, m := range fleet.Status.FailedMembers {
			if m.Namespace == hcp {
				assert.Contains(a, m.Message, "belongs to HostedCluster "+base+"-x/b", "the other one is still reported")
			}
		}
	}, "the owner's member is written")
}

// TestConnectorServerElsewhereRefused: a connector Secret pointing at a server that is not the
// hosted API server of its namespace (here an HTTPS service answering with a page that holds a
// secret) is refused before anything is sent to it (InsecureKubeconfig, naming the field and
// the flag). When that server is the endpoint the HostedCluster advertises, pkgsync talks to
// it, and what it answers that is not a Kubernetes API object never reaches the status.
func TestConnectorServerElsewhereRefused(t *testing.T) {
	t.Parallel()
	const marker = "internal-dashboard-s3cr3t"
	var requests atomic.Int64
	page := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if r.URL.Path == "/readyz" {
			_, _ = w.Write([]byte("ok"))
			return
		}
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte("<html>" + marker + "</html>"))
	}))
	page.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	page.StartTLS()
	t.Cleanup(page.Close)

	_, hcp := newHostedCluster(t, true) // advertises the suite's hosted control plane
	good, err := suite.hosted.ConnectorKubeconfig("elsewhere-" + hcp)
	require.NoError(t, err)
	cfg, err := clientcmd.Load(good)
	require.NoError(t, err)
	for _, c := range cfg.Clusters {
		c.Server = page.URL
		c.CertificateAuthorityData = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: page.Certificate().Raw})
	}
	elsewhere, err := clientcmd.Write(*cfg)
	require.NoError(t, err)
	writeConnectorSecret(t, hcp, elsewhere)

	cmName := "elsewhere-" + hcp
	pkg := newPackage(hcp, "elsewhere", hostedWavePackage(t, "e2e/"+hcp+"/hosted-wave:v1"), `{"name":"`+cmName+`"}`)
	require.NoError(t, suite.mgmtClient.Create(t.Context(), pkg))
	cond := waitForReady(t, pkg, metav1.ConditionFalse, v1alpha1.InsecureKubeconfigReason)
	assert.Contains(t, cond.Message, ".server")
	assert.Contains(t, cond.Message, "kube-apiserver."+hcp+".svc")
	assert.Contains(t, cond.Message, "--insecure-kubeconfig-any-server")
	assert.Zero(t, requests.Load(), "nothing is sent to a refused server")

	// The HostedCluster advertises that server: it is the hosted API server now, as far as
	// pkgsync can tell, and what it answers is reported without its body.
	advertiseServer(t, hcp, elsewhere)
	eventually(t, func(a *attempt) {
		cond := readyCondition(a, pkg)
		if assert.NotNil(a, cond) {
			assert.NotEqual(a, v1alpha1.InsecureKubeconfigReason, cond.Reason)
			assert.Contains(a, cond.Message, "HTTP 500")
		}
		assert.Positive(a, requests.Load())
	}, "the advertised server is used")
	require.NoError(t, suite.mgmtClient.Get(t.Context(), client.ObjectKeyFromObject(pkg), pkg))
	for _, c := range pkg.Status.Conditions {
		assert.NotContains(t, c.Message, marker, "condition %s", c.Type)
	}
	var events corev1.EventList
	require.NoError(t, suite.mgmtClient.List(t.Context(), &events, client.InNamespace(hcp)))
	for _, e := range events.Items {
		assert.False(t, strings.Contains(e.Message, marker), "event %s: %s", e.Reason, e.Message)
	}
	// Back to the hosted API server, so that the Package's deletion can tear its phase down.
	putConnectorSecret(t, hcp, good)
}
