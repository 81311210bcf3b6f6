package e2e

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// preflightLabel marks the HostedClusters the broken candidate cannot render for.
const preflightLabel = "e2e.pkgsync.dev/preflight"

// preflightPackage is fleetPackage version v; failOnBad makes its template fail for clusters
// labelled preflightLabel=bad, and only for them.
func preflightPackage(version string, failOnBad bool) map[string]string {
	files := fleetPackage(version, false)
	if failOnBad {
		line := `version: "` + version + `"`
		files["config.yaml.gotmpl"] = strings.Replace(files["config.yaml.gotmpl"], line, line+
			`{{ if eq (index .environment.hyperShift.hostedCluster.metadata.labels "`+preflightLabel+`" | default "") "bad" }}{{ fail "version `+version+` cannot run here" }}{{ end }}`, 1)
	}
	return files
}

// apiProxy serves the management API server on a loopback address without authentication
// (it authenticates as the suite's administrator) and counts what passes: writes (every method
// but GET, HEAD and OPTIONS) apart from server-side dry runs.
type apiProxy struct {
	mu              sync.Mutex
	writes, dryRuns []string
	kubeconfig      string
}

func newAPIProxy(t *testing.T) *apiProxy {
	t.Helper()
	rt, err := rest.TransportFor(suite.mgmt.Config)
	require.NoError(t, err)
	target, err := url.Parse(suite.mgmt.Config.Host)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = rt
	p := &apiProxy{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
		default:
			p.mu.Lock()
			if r.URL.Query().Get("dryRun") == "All" {
				p.dryRuns = append(p.dryRuns, r.Method+" "+r.URL.Path)
			} else {
				p.writes = append(p.writes, r.Method+" "+r.URL.Path)
			}
			p.mu.Unlock()
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	kc := clientcmdapi.NewConfig()
	kc.Clusters["proxy"] = &clientcmdapi.Cluster{Server: srv.URL}
	kc.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	kc.CurrentContext = "proxy"
	data, err := clientcmd.Write(*kc)
	require.NoError(t, err)
	p.kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(p.kubeconfig, data, 0o600))
	return p
}

func (p *apiProxy) counted() (writes, dryRuns []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.writes...), append([]string(nil), p.dryRuns...)
}

// runPlan runs `pkgsync fleet plan` through the proxy and returns its output and exit code.
func runPlan(t *testing.T, p *apiProxy, args ...string) (string, int) {
	t.Helper()
	stdout, _, code := runPlanStderr(t, p, args...)
	return stdout, code
}

// runPlanStderr is runPlan, stderr returned too.
func runPlanStderr(t *testing.T, p *apiProxy, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), crashBinary(t), append([]string{"fleet", "plan", "--kubeconfig", p.kubeconfig}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		require.NoError(t, err)
	}
	t.Logf("pkgsync fleet plan %v:\n%s%s", args, stdout.String(), stderr.String())
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}

// TestFleetPlanWarnsOfDroppedConfigKeys: a fleet's configuration key the package's schema does not
// declare is dropped from every member's render; fleet plan says so on stderr, as validate and
// render do, once for the members it is about.
func TestFleetPlanWarnsOfDroppedConfigKeys(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	clusters := newFleetClusters(t, ns, ns, "prod", "prod")
	image := suite.registry.Host + "/fleet-plan-warnings/" + ns + ":1"
	pushPackageTo(t, writePackage(t, fleetPackage("1", false)), image)
	fleet := &v1alpha1.HostedClusterPackage{
		ObjectMeta: metav1.ObjectMeta{Name: "warned-" + ns[len(ns)-8:]},
		Spec: v1alpha1.HostedClusterPackageSpec{
			HostedClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"e2e.pkgsync.dev/fleet": ns}},
			Template: v1alpha1.PackageTemplate{Spec: v1alpha1.PackageSpec{
				Image: image, Interval: &metav1.Duration{Duration: time.Hour},
				Config: &apiextensionsv1.JSON{Raw: []byte(`{"messag":"hi"}`)},
			}},
		},
	}
	newFleet(t, fleet)
	out, stderr, code := runPlanStderr(t, newAPIProxy(t), fleet.Name, "--image", image)
	assert.Equal(t, 0, code, "a dropped key is a warning, not a failure")
	for cp := range clusters {
		assert.NotEmpty(t, planRow(out, cp), cp)
	}
	assert.Equal(t, 1, strings.Count(stderr, "Warning: "), stderr)
	assert.Regexp(t, `Warning: members `+ns+`-hc[01], `+ns+`-hc[01]: config.messag is not in the package's configuration schema and is dropped; did you mean message\?`, stderr)
}

// planRow returns the table row of namespace in a plan's output.
func planRow(out, namespace string) string {
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[1] == namespace {
			return line
		}
	}
	return ""
}

// TestFleetPreflight rolls out a candidate whose template fails for the clusters labelled
// preflightLabel=bad. With spec.rollout.preflight the rollout halts before the first canary
// moves, naming the bad member, and no member is written (counted); `pkgsync fleet plan` shows
// the same, partition by partition, writing nothing (counted by a proxy) and exiting 1; a
// good candidate then moves every member.
func TestFleetPreflight(t *testing.T) {
	t.Parallel()
	registry := suite.registry.Host
	ns := newNamespace(t)
	clusters := newFleetClusters(t, ns, ns, "canary", "prod", "prod")
	var bad string
	for cp, hc := range clusters {
		if hc.GetName() == "hc2" {
			bad = cp
			lbls := hc.GetLabels()
			lbls[preflightLabel] = "bad"
			hc.SetLabels(lbls)
			require.NoError(t, suite.mgmtClient.Update(t.Context(), hc))
		}
	}
	require.NotEmpty(t, bad)
	repo := "fleet-preflight/" + ns
	v1 := pushPackageTo(t, writePackage(t, preflightPackage("1", false)), registry+"/"+repo+":stable")

	fleet := &v1alpha1.HostedClusterPackage{
		ObjectMeta: metav1.ObjectMeta{Name: "preflight-" + ns[len(ns)-8:]},
		Spec: v1alpha1.HostedClusterPackageSpec{
			HostedClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"e2e.pkgsync.dev/fleet": ns}},
			Template: v1alpha1.PackageTemplate{
				Spec: v1alpha1.PackageSpec{Image: registry + "/" + repo + ":stable", Interval: &metav1.Duration{Duration: time.Hour}},
			},
			Rollout: v1alpha1.FleetRolloutStrategy{
				Partitions: &v1alpha1.FleetPartitions{LabelKey: "rollout-wave", Order: &v1alpha1.PartitionOrder{Static: []string{"canary", "*"}}},
				Preflight:  true,
			},
		},
	}
	newFleet(t, fleet)
	waitForFleet(t, fleet.Name, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, v1)
	memberPath := func(namespace string) string {
		return "/apis/pkgsync.dev/v1alpha1/namespaces/" + namespace + "/packages/" + fleet.Name
	}
	writesBefore := map[string]int{}
	for cp := range clusters {
		writesBefore[cp] = suite.requests.path(http.MethodPut, memberPath(cp))
	}

	// The broken candidate: the preflight halts the rollout before any member moves.
	v2 := pushPackageTo(t, writePackage(t, preflightPackage("2", true)), registry+"/"+repo+":stable")
	requestFleetReconcile(t, fleet)
	got := waitForFleet(t, fleet.Name, metav1.ConditionFalse, v1alpha1.PreflightFailedReason, v2)
	msg := conditions.GetMessage(got, meta.ReadyCondition)
	assert.Contains(t, msg, bad, "the failing member is named")
	assert.Contains(t, msg, "cannot run here")
	assert.True(t, conditions.IsStalled(got), "a halt: Stalled=True")
	require.Len(t, got.Status.FailedMembers, 1)
	assert.Equal(t, bad, got.Status.FailedMembers[0].Namespace)
	assert.Equal(t, v1alpha1.RenderFailedReason, got.Status.FailedMembers[0].Reason)
	for cp, m := range fleetMembers(t, t.Context(), fleet.Name) {
		assert.Equal(t, registry+"/"+repo+":stable@"+v1, m.Spec.Image, "member %s not moved", cp)
	}
	// Further reconciles keep it halted and write no member.
	requestFleetReconcile(t, fleet)
	waitForFleet(t, fleet.Name, metav1.ConditionFalse, v1alpha1.PreflightFailedReason, v2)
	for cp := range clusters {
		assert.Equal(t, writesBefore[cp], suite.requests.path(http.MethodPut, memberPath(cp)), "member %s written", cp)
	}

	// The plan of the target shows the same and changes nothing.
	proxy := newAPIProxy(t)
	out, code := runPlan(t, proxy, fleet.Name)
	assert.Equal(t, 1, code, "a member would fail")
	assert.Contains(t, planRow(out, bad), "fails")
	assert.Contains(t, planRow(out, bad), "RenderFailed")
	for cp := range clusters {
		if cp != bad {
			assert.Contains(t, planRow(out, cp), "moves", cp)
		}
	}
	assert.Less(t, strings.Index(out, "canary"), strings.Index(out, "prod"), "partition by partition, in rollout order")

	// The plan of a good candidate: every member moves, the objects are dry-run.
	pushPackageTo(t, writePackage(t, preflightPackage("3", false)), registry+"/"+repo+":3")
	out, code = runPlan(t, proxy, fleet.Name, "--image", registry+"/"+repo+":3")
	assert.Equal(t, 0, code)
	for cp := range clusters {
		assert.Contains(t, planRow(out, cp), "moves", cp)
	}
	writes, dryRuns := proxy.counted()
	assert.Empty(t, writes, "fleet plan writes nothing")
	assert.NotEmpty(t, dryRuns, "fleet plan dry-runs the management objects")
	for _, d := range dryRuns {
		assert.Contains(t, d, "/configmaps/fleet-app", "only the package's objects are dry-run")
	}

	// The good candidate moves every member.
	v3 := pushPackageTo(t, writePackage(t, preflightPackage("3", false)), registry+"/"+repo+":stable")
	requestFleetReconcile(t, fleet)
	waitForFleet(t, fleet.Name, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, v3)
	eventually(t, func(a *attempt) {
		for cp := range clusters {
			assert.Equal(a, "3", configMapData(a, cp, "fleet-app")["version"], cp)
		}
	})
}
