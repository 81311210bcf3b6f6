package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// requestCounter counts the controller's requests to the management API server by namespace
// and method, so tests can assert what a reconcile costs. Requests to a status subresource are
// also counted under "METHOD status" (a status PATCH counts as PATCH and as "PATCH status"),
// the others under "METHOD RESOURCE" too ("GET configmaps").
type requestCounter struct {
	mu     sync.Mutex
	counts map[string]map[string]int // namespace → method → count
	// paths counts every request, namespaced or not, by "METHOD PATH".
	paths map[string]int
}

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		c.mu.Lock()
		if c.paths == nil {
			c.paths = map[string]int{}
		}
		c.paths[r.Method+" "+r.URL.Path]++
		c.mu.Unlock()
		if ns := namespaceOf(r.URL.Path); ns != "" {
			c.mu.Lock()
			if c.counts == nil {
				c.counts = map[string]map[string]int{}
			}
			if c.counts[ns] == nil {
				c.counts[ns] = map[string]int{}
			}
			c.counts[ns][r.Method]++
			if strings.HasSuffix(r.URL.Path, "/status") {
				c.counts[ns][r.Method+" status"]++
			} else if resource := resourceOf(r.URL.Path); resource != "" {
				c.counts[ns][r.Method+" "+resource]++
			}
			c.mu.Unlock()
		}
		return rt.RoundTrip(r)
	})
}

func (c *requestCounter) get(ns string) map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for m, n := range c.counts[ns] {
		out[m] = n
	}
	return out
}

// path returns how many METHOD requests went to path.
func (c *requestCounter) path(method, path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.paths[method+" "+path]
}

// namespaceOf returns the namespace of a request path, ignoring events (they are not objects
// pkgsync manages).
func namespaceOf(path string) string {
	parts := strings.Split(path, "/")
	for i := 0; i+1 < len(parts); i++ {
		if parts[i] == "namespaces" {
			if i+2 < len(parts) && parts[i+2] == "events" {
				return ""
			}
			return parts[i+1]
		}
	}
	return ""
}

// resourceOf returns the resource of a namespaced request path (configmaps, deployments).
func resourceOf(path string) string {
	parts := strings.Split(path, "/")
	for i := 0; i+2 < len(parts); i++ {
		if parts[i] == "namespaces" {
			return parts[i+2]
		}
	}
	return ""
}

// requestsSince returns what a namespace's counts (requestCounter.get) grew by from before to
// after, and the requests that makes: "METHOD status" and "METHOD RESOURCE" are counted under
// METHOD too, so only the plain methods add up.
func requestsSince(before, after map[string]int) (delta map[string]int, total int) {
	delta = map[string]int{}
	for key, n := range after {
		if d := n - before[key]; d > 0 {
			delta[key] = d
			if !strings.Contains(key, " ") {
				total += d
			}
		}
	}
	return delta, total
}

// registryCounter counts the requests the suite's source client (the controllers' and the
// tests') sends to registries, by method and path, so tests can assert what reconciles cost
// the registry. Each test uses repositories of its own, so paths keep tests apart.
type registryCounter struct {
	base   http.RoundTripper
	mu     sync.Mutex
	counts map[string]int // "METHOD /v2/REPOSITORY/..." → count
}

func newRegistryCounter() *registryCounter {
	return &registryCounter{base: http.DefaultTransport.(*http.Transport).Clone(), counts: map[string]int{}}
}

func (c *registryCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.counts[r.Method+" "+r.URL.Path]++
	c.mu.Unlock()
	return c.base.RoundTrip(r)
}

// count returns how many METHOD requests went to path (/v2/REPOSITORY/tags/list).
func (c *registryCounter) count(method, path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[method+" "+path]
}

// tagLists counts the tag listings of a repository of the suite's registry.
func (c *registryCounter) tagLists(repo string) int {
	return c.count(http.MethodGet, "/v2/"+repo+"/tags/list")
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestNoOpReconcileWritesNothing lets a converged Package reconcile on a one-second interval
// and counts the controller's requests in its namespace: reads happen, writes do not.
func TestNoOpReconcileWritesNothing(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	pushPackage(t, writePackage(t, appPackage), "e2e/"+ns+"/app:v1")
	pkg := newPackage(ns, "app", suite.registry.Host+"/e2e/"+ns+"/app:v1", "")
	pkg.Spec.Interval = &metav1.Duration{Duration: time.Second}
	require.NoError(t, suite.mgmtClient.Create(t.Context(), pkg))
	markDeploymentAvailable(t, suite.mgmtClient, ns, "app")
	waitForReady(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	eventually(t, func(a *attempt) {
		readyCondition(a, pkg)
		assert.Equal(a, pkg.Generation, pkg.Status.ObservedGeneration)
	})

	const objects, reconciles = 3, 3
	before := suite.requests.get(ns)
	eventually(t, func(a *attempt) {
		assert.GreaterOrEqual(a, suite.requests.get(ns)["GET"]-before["GET"], objects*reconciles)
	}, "the Package reconciles on its interval")
	after := suite.requests.get(ns)
	for _, method := range []string{"POST", "PUT", "PATCH", "DELETE"} {
		assert.Equal(t, before[method], after[method], "%s requests during no-op reconciles", method)
	}
}

// TestStatusWritesPerReconcile counts the status requests of the reconciles a Package goes
// through. A reconcile that creates objects writes the intended inventory first (crash safety)
// and its outcome last; one that updates objects it already holds writes its outcome only, in
// one request: conditions and the rest of the status together.
func TestStatusWritesPerReconcile(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	image := suite.registry.Host + "/e2e/" + ns + "/cms:stable"
	pushPackage(t, writePackage(t, configMapsPackage("", nil, "one", "two")), "e2e/"+ns+"/cms:stable")
	statusPatches := func() int { return suite.requests.get(ns)["PATCH status"] }

	pkg := newPackage(ns, "cms", image, "")
	createPackage(t, pkg)
	eventually(t, func(a *attempt) {
		readyCondition(a, pkg)
		assert.Equal(a, pkg.Generation, pkg.Status.ObservedGeneration)
		assert.NotEmpty(a, pkg.Status.LastAppliedRevision)
	}, "the Package converges")
	assert.Equal(t, 2, statusPatches(), "status writes of the first reconcile: the intended inventory, then the outcome")

	t.Run("an update of the objects it holds writes once", func(t *testing.T) {
		v2 := configMapsPackage("", nil, "one", "two")
		v2["objects.yaml"] = strings.ReplaceAll(v2["objects.yaml"], "\ndata:\n", "\ndata:\n  version: v2\n")
		digest2 := pushPackage(t, writePackage(t, v2), "e2e/"+ns+"/cms:stable")
		before := statusPatches()
		requestReconcile(t, pkg)
		eventually(t, func(a *attempt) {
			readyCondition(a, pkg)
			assert.Equal(a, digest2, pkg.Status.LastAppliedRevision)
			assert.Equal(a, pkg.Annotations[meta.ReconcileRequestAnnotation], pkg.Status.LastHandledReconcileAt)
		}, "the Package applies the new digest")
		assert.Equal(t, "v2", configMapData(t, ns, "one")["version"])
		assert.Equal(t, 1, statusPatches()-before, "status writes of a reconcile that changes objects it holds")
	})
}

// events counts the Events the controller wrote (created or, when aggregated, patched) in ns.
func (c *requestCounter) events(ns string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, p := range []string{"/api/v1/namespaces/" + ns + "/events", "/apis/events.k8s.io/v1/namespaces/" + ns + "/events"} {
		for key, count := range c.paths {
			method, path, _ := strings.Cut(key, " ")
			if (method == http.MethodPost || method == http.MethodPatch) && strings.HasPrefix(path, p) {
				n += count
			}
		}
	}
	return n
}

// TestRequestsPerNewPackage counts, per verb, what a new Package of three phases of eight
// ConfigMaps costs the management API server until it is Ready: one apply per object and no
// read (a new object is created without looking for it first; the apply answer is the live
// object availability is checked on), plus at most four requests: the finalizer, the intended
// inventory (once for the pass, not once per phase), the outcome, and the one Event of Ready
// turning true.
func TestRequestsPerNewPackage(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	pushPackage(t, writePackage(t, crashPackage()), "e2e/"+ns+"/three:v1")
	const objects = 24
	before := suite.requests.get(ns)
	eventsBefore := suite.requests.events(ns)

	pkg := newPackage(ns, "three", suite.registry.Host+"/e2e/"+ns+"/three:v1", "")
	createPackage(t, pkg)
	eventually(t, func(a *attempt) {
		readyCondition(a, pkg)
		assert.Equal(a, pkg.Generation, pkg.Status.ObservedGeneration)
		assert.Equal(a, 1, suite.requests.events(ns)-eventsBefore, "the Event of Ready turning true")
	}, "the Package converges")
	delta, total := requestsSince(before, suite.requests.get(ns))
	events := suite.requests.events(ns) - eventsBefore
	t.Logf("requests of a new Package of %d objects: %v, events %d", objects, delta, events)
	assert.Zero(t, delta[http.MethodGet], "reads of objects that are new")
	assert.Equal(t, 2, delta["PATCH status"], "status writes: the intended inventory once, then the outcome")
	assert.Equal(t, objects+3, delta[http.MethodPatch], "one apply per object, the finalizer and two status writes")
	assert.LessOrEqual(t, total+events, objects+4, "requests per new Package")

	t.Run("a no-op reconcile reads each object at most once and writes nothing", func(t *testing.T) {
		before := suite.requests.get(ns)
		eventsBefore := suite.requests.events(ns)
		requestReconcile(t, pkg)
		eventually(t, func(a *attempt) {
			readyCondition(a, pkg)
			assert.Equal(a, pkg.Annotations[meta.ReconcileRequestAnnotation], pkg.Status.LastHandledReconcileAt)
		}, "the Package handles the request")
		after := suite.requests.get(ns)
		assert.LessOrEqual(t, after[http.MethodGet]-before[http.MethodGet], objects, "reads")
		// The request itself is acknowledged in status: that one write is the request's, not the pass's.
		assert.LessOrEqual(t, after["PATCH status"]-before["PATCH status"], 1, "status writes")
		assert.Equal(t, after["PATCH status"]-before["PATCH status"], after[http.MethodPatch]-before[http.MethodPatch], "no object writes")
		assert.Zero(t, suite.requests.events(ns)-eventsBefore, "events")
	})
}

// countedPackage is a package of three phases: a hosted phase (a Namespace, a ServiceAccount,
// two ConfigMaps), a management phase of two ConfigMaps and, when wait, a Deployment that keeps
// the Package waiting, and a second hosted phase of two ConfigMaps.
func countedPackage(hostedNS string, wait bool) map[string]string {
	object := func(kind, name, namespace, phase string) string {
		ns := ""
		if namespace != "" {
			ns = "\n  namespace: " + namespace
		}
		return fmt.Sprintf("---\napiVersion: v1\nkind: %s\nmetadata:\n  name: %s%s\n  annotations:\n    pkgsync.dev/phase: %s\n", kind, name, ns, phase)
	}
	operator := object("ConfigMap", "operator-a", "", "operator") + object("ConfigMap", "operator-b", "", "operator")
	if wait {
		operator += "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: operator\n  annotations:\n    pkgsync.dev/phase: operator\n" +
			"spec:\n  selector:\n    matchLabels: {app: operator}\n  template:\n    metadata:\n      labels: {app: operator}\n" +
			"    spec:\n      containers:\n      - name: operator\n        image: registry.k8s.io/pause:3.10\n"
	}
	return map[string]string{
		"manifest.yaml": "apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata:\n  name: counted\nspec:\n  phases:\n" +
			"  - name: rbac\n    class: hosted-cluster\n  - name: operator\n  - name: config\n    class: hosted-cluster\n",
		"rbac.yaml": object("Namespace", hostedNS, "", "rbac") + object("ServiceAccount", "operator", hostedNS, "rbac") +
			object("ConfigMap", "rbac-a", hostedNS, "rbac") + object("ConfigMap", "rbac-b", hostedNS, "rbac"),
		"operator.yaml": operator,
		"config.yaml":   object("ConfigMap", "config-a", hostedNS, "config") + object("ConfigMap", "config-b", hostedNS, "config"),
	}
}

// hostedRequests returns what user sent the suite's hosted API server, by verb and resource
// (its audit log), and how many requests that makes.
func hostedRequests(t *testing.T, user string) (map[string]int, int) {
	t.Helper()
	requests, err := suite.hosted.Requests(user)
	require.NoError(t, err)
	total := 0
	for _, n := range requests {
		total += n
	}
	return requests, total
}

// TestRequestsPerNewHostedPackage counts, per cluster, what a new Package of three phases, two
// of them in the hosted cluster, costs until it is Ready. The hosted API server's audit log
// tells the Package's connector user apart: it sees one apply per object and one request more,
// the first contact's health check, and no read. The management cluster sees one read: the
// connector Secret's data, read once per hosted client built (the cache holds only its
// metadata).
func TestRequestsPerNewHostedPackage(t *testing.T) {
	t.Parallel()
	_, hcp := newHostedControlPlane(t, "", true)
	const hostedObjects, mgmtObjects = 6, 2
	pushPackage(t, writePackage(t, countedPackage("counted-"+hcp, false)), "e2e/"+hcp+"/counted:v1")
	before := suite.requests.get(hcp)
	eventsBefore := suite.requests.events(hcp)
	_, hostedBefore := hostedRequests(t, "hcp-"+hcp)
	require.Zero(t, hostedBefore, "the connector user is the Package's own")

	pkg := newPackage(hcp, "counted", suite.registry.Host+"/e2e/"+hcp+"/counted:v1", "")
	createPackage(t, pkg)
	eventually(t, func(a *attempt) {
		readyCondition(a, pkg)
		assert.Equal(a, pkg.Generation, pkg.Status.ObservedGeneration)
	}, "the Package converges")

	hosted, total := hostedRequests(t, "hcp-"+hcp)
	t.Logf("hosted requests of a new Package of %d hosted objects: %v", hostedObjects, hosted)
	assert.Equal(t, hostedObjects, hosted["patch namespaces"]+hosted["patch serviceaccounts"]+hosted["patch configmaps"], "one apply per hosted object")
	assert.LessOrEqual(t, total, hostedObjects+1, "hosted requests per new Package")

	delta, total := requestsSince(before, suite.requests.get(hcp))
	events := suite.requests.events(hcp) - eventsBefore
	t.Logf("management requests: %v, events %d", delta, events)
	assert.Equal(t, 1, delta[http.MethodGet], "management reads")
	assert.Equal(t, 1, delta[http.MethodGet+" secrets"], "the one read is the connector Secret's data")
	assert.LessOrEqual(t, total+events, mgmtObjects+4+1, "management requests per new Package")
}

// TestRequestsPerWaitingHostedPackage: the same package with a Deployment in its management
// phase, which keeps the Package waiting for several passes. Those passes read the Deployment
// only, on either cluster: the objects found available are read once more, by the pass that
// completes (it never completes on memory alone), and the last phase's objects, recorded by the
// first pass, are created without a read.
func TestRequestsPerWaitingHostedPackage(t *testing.T) {
	t.Parallel()
	_, hcp := newHostedControlPlane(t, "", true)
	user := "hcp-" + hcp
	const hostedObjects, hostedFirstPhase, mgmtObjects = 6, 4, 3
	pushPackage(t, writePackage(t, countedPackage("counted-"+hcp, true)), "e2e/"+hcp+"/counted:v1")
	before := suite.requests.get(hcp)
	eventsBefore := suite.requests.events(hcp)

	pkg := newPackage(hcp, "counted", suite.registry.Host+"/e2e/"+hcp+"/counted:v1", "")
	createPackage(t, pkg)
	eventually(t, func(a *attempt) {
		assert.GreaterOrEqual(a, suite.requests.get(hcp)["GET deployments"]-before["GET deployments"], 3, "passes waiting on the Deployment")
	}, "the Package waits on its Deployment")
	hosted, total := hostedRequests(t, user)
	assert.Equal(t, hostedFirstPhase+1, total, "the waiting passes send the hosted cluster nothing: %v", hosted)
	markDeploymentAvailable(t, suite.mgmtClient, hcp, "operator")
	eventually(t, func(a *attempt) {
		readyCondition(a, pkg)
		assert.Equal(a, pkg.Generation, pkg.Status.ObservedGeneration)
	}, "the Package converges")

	hosted, total = hostedRequests(t, user)
	t.Logf("hosted requests of a new Package of %d hosted objects: %v", hostedObjects, hosted)
	assert.Equal(t, hostedObjects, hosted["patch namespaces"]+hosted["patch serviceaccounts"]+hosted["patch configmaps"], "one apply per hosted object")
	assert.Equal(t, hostedFirstPhase, hosted["get namespaces"]+hosted["get serviceaccounts"]+hosted["get configmaps"],
		"the first phase's objects read once, when the Package completes")
	assert.LessOrEqual(t, total, hostedObjects+hostedFirstPhase+1, "hosted requests per new Package")

	delta, _ := requestsSince(before, suite.requests.get(hcp))
	t.Logf("management requests of a new Package of %d management objects: %v, events %d", mgmtObjects, delta, suite.requests.events(hcp)-eventsBefore)
	assert.Equal(t, 2, delta["GET configmaps"], "the ConfigMaps found available are read once, when the Package completes")
	assert.Equal(t, mgmtObjects, delta["PATCH configmaps"]+delta["PATCH deployments"], "one apply per management object")
	assert.LessOrEqual(t, delta["PATCH status"], 3, "status writes: the intended inventory, progress, the outcome")
	assert.Equal(t, 2, suite.requests.events(hcp)-eventsBefore, "the Events of Ready turning False (progressing), then true")
}

// TestRequestsPerHostedUpdate (issue 46): an update of a converged Package that changes one
// object on each cluster, of six hosted and two management objects, costs one write on each
// cluster and no read of the objects it does not change: the complete pass before settled them
// (each read or written then), and the changed ConfigMaps are applied over the resourceVersion
// that pass left them at, a precondition that keeps the collision check without a read.
func TestRequestsPerHostedUpdate(t *testing.T) {
	t.Parallel()
	_, hcp := newHostedControlPlane(t, "", true)
	user := "hcp-" + hcp
	hostedNS := "counted-" + hcp
	image := suite.registry.Host + "/e2e/" + hcp + "/counted:stable"
	pushPackageTo(t, writePackage(t, countedPackage(hostedNS, false)), image)
	pkg := newPackage(hcp, "counted", image, "")
	createPackage(t, pkg)
	eventually(t, func(a *attempt) {
		readyCondition(a, pkg)
		assert.Equal(a, pkg.Generation, pkg.Status.ObservedGeneration)
	}, "the Package converges")

	v2 := countedPackage(hostedNS, false)
	withData := func(file, name string) {
		marker := "name: " + name + "\n"
		i := strings.Index(v2[file], marker)
		require.GreaterOrEqual(t, i, 0, "%s in %s", name, file)
		end := strings.Index(v2[file][i:], "\n---") + 1 // after the object's last line
		if end <= 0 {
			end = len(v2[file]) - i
		}
		v2[file] = v2[file][:i+end] + "data:\n  version: v2\n" + v2[file][i+end:]
	}
	withData("config.yaml", "config-a")
	withData("operator.yaml", "operator-a")
	hostedCounts, hostedBefore := hostedRequests(t, user)
	before := suite.requests.get(hcp)
	digest2 := pushPackageTo(t, writePackage(t, v2), image)
	requestReconcile(t, pkg)
	eventually(t, func(a *attempt) {
		readyCondition(a, pkg)
		assert.Equal(a, digest2, pkg.Status.LastAppliedRevision)
	}, "the Package applies the update")

	hosted, total := hostedRequests(t, user)
	for k, n := range hostedCounts {
		hosted[k] -= n
	}
	t.Logf("hosted requests of the update: %v", hosted)
	assert.Equal(t, 1, hosted["patch configmaps"], "the changed hosted ConfigMap is written")
	assert.Zero(t, hosted["patch namespaces"]+hosted["patch serviceaccounts"], "nothing else is written")
	assert.Zero(t, hosted["get namespaces"]+hosted["get serviceaccounts"]+hosted["get configmaps"], "no hosted object is read")
	assert.LessOrEqual(t, total-hostedBefore, 1, "hosted requests of the update")

	delta, _ := requestsSince(before, suite.requests.get(hcp))
	t.Logf("management requests of the update: %v", delta)
	assert.Equal(t, 1, delta["PATCH configmaps"], "the changed management ConfigMap is written")
	assert.Zero(t, delta["GET configmaps"], "no management object is read")
	assert.Equal(t, "v2", configMapData(t, hcp, "operator-a")["version"])
}
