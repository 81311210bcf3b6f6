package apply_test

import (
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/test/testenv"
)

const (
	eventuallyTimeout  = 20 * time.Second
	eventuallyInterval = 100 * time.Millisecond
)

var (
	management *testenv.ControlPlane
	hosted     *testenv.ControlPlane
)

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "pkgsync-apply-test-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	management, err = testenv.StartControlPlane("management", dir)
	if err != nil {
		panic(err)
	}
	defer func() { _ = management.Stop() }()
	hosted, err = testenv.StartControlPlane("hosted", dir)
	if err != nil {
		panic(err)
	}
	defer func() { _ = hosted.Stop() }()
	return m.Run()
}

// newClient returns a client with controller-runtime's default, lazily discovering RESTMapper.
func newClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	c, err := client.New(cfg, client.Options{})
	require.NoError(t, err)
	return c
}

// env is one test's view of the two clusters: fresh clients and a random namespace on each.
type env struct {
	mgmt, hosted client.Client
	ns           string
	owner        apply.Owner
	targets      map[string]apply.Target
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{mgmt: newClient(t, management.Config), hosted: newClient(t, hosted.Config), ns: "test-" + rand.String(6)}
	for _, c := range []client.Client{e.mgmt, e.hosted} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}
		require.NoError(t, c.Create(t.Context(), ns))
	}
	e.owner = apply.Owner{Kind: "Package", Namespace: e.ns, Name: "pkg"}
	e.targets = map[string]apply.Target{
		"":               {Client: e.mgmt, Name: "management cluster"},
		"hosted-cluster": {Client: e.hosted, Name: "hosted cluster " + e.ns},
	}
	return e
}

// obj parses a YAML manifest; the namespace placeholder NS is replaced by the test's namespace.
func (e *env) obj(t *testing.T, manifest string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal([]byte(manifest), &u.Object))
	if u.GetNamespace() == "NS" {
		u.SetNamespace(e.ns)
	}
	return u
}

func (e *env) configMap(t *testing.T, name string, data map[string]string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetNamespace(e.ns)
	u.SetName(name)
	m := map[string]any{}
	for k, v := range data {
		m[k] = v
	}
	u.Object["data"] = m
	return u
}

// get reads an object the way it is live on a cluster; ok is false when it does not exist.
func get(t *testing.T, c client.Client, like *unstructured.Unstructured) (*unstructured.Unstructured, bool) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(like.GroupVersionKind())
	err := c.Get(t.Context(), client.ObjectKeyFromObject(like), u)
	if err != nil {
		require.NoError(t, client.IgnoreNotFound(err))
		return nil, false
	}
	return u, true
}

// applyUntilComplete repeats passes the way the controller's requeue does.
func applyUntilComplete(t *testing.T, engine *apply.Engine, req apply.Request) *apply.Result {
	t.Helper()
	var res *apply.Result
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var err error
		res, err = engine.Apply(t.Context(), req)
		if !assert.NoError(c, err) {
			return
		}
		req.Previous = res.Inventory
		if !res.Complete() {
			c.Errorf("not complete: %s", res.Summary())
		}
	}, eventuallyTimeout, eventuallyInterval)
	return res
}

// setDeploymentAvailable plays the Deployment controller, which envtest does not run.
func setDeploymentAvailable(t *testing.T, c client.Client, ns, name string) {
	t.Helper()
	setDeploymentStatus(t, c, ns, name, true)
}

// setDeploymentStatus plays the Deployment controller reporting every replica available, or
// none (its pods gone).
func setDeploymentStatus(t *testing.T, c client.Client, ns, name string, available bool) {
	t.Helper()
	writeDeploymentStatus(t, c, ns, name, func(replicas int64, now string) (int64, []any) {
		if !available {
			return 0, []any{
				map[string]any{"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable", "lastTransitionTime": now},
				map[string]any{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable", "lastTransitionTime": now},
			}
		}
		return replicas, []any{
			map[string]any{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable", "lastTransitionTime": now},
			map[string]any{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable", "lastTransitionTime": now},
		}
	})
}

// writeDeploymentStatus writes a Deployment's status as its controller would, at its current
// generation with every replica updated: conditions gives the replicas ready and the conditions.
func writeDeploymentStatus(t *testing.T, c client.Client, ns, name string, conditions func(replicas int64, now string) (ready int64, conds []any)) {
	t.Helper()
	d := &unstructured.Unstructured{}
	d.SetAPIVersion("apps/v1")
	d.SetKind("Deployment")
	require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, d))
	replicas, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas")
	ready, conds := conditions(replicas, time.Now().UTC().Format(time.RFC3339))
	d.Object["status"] = map[string]any{
		"observedGeneration":  d.GetGeneration(),
		"replicas":            replicas,
		"updatedReplicas":     replicas,
		"availableReplicas":   ready,
		"readyReplicas":       ready,
		"unavailableReplicas": replicas - ready,
		"conditions":          conds,
	}
	require.NoError(t, c.Status().Update(t.Context(), d))
}

// countingTransport counts the requests sent through it by HTTP method.
type countingTransport struct {
	next   http.RoundTripper
	mu     sync.Mutex
	counts map[string]int
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.counts[r.Method]++
	c.mu.Unlock()
	return c.next.RoundTrip(r)
}

func (c *countingTransport) reset() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.counts
	c.counts = map[string]int{}
	return out
}

func countingConfig(cfg *rest.Config) (*rest.Config, *countingTransport) {
	ct := &countingTransport{counts: map[string]int{}}
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		ct.next = rt
		return ct
	})
	return out, ct
}
