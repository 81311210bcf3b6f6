package e2e

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/receiver"
	"pkgsync.dev/pkgsync/internal/reconciler"
	"pkgsync.dev/pkgsync/internal/wakes"
	"pkgsync.dev/pkgsync/test/testenv"
)

// notifyEnv is a controller of its own shard woken by registry notifications, its receiver
// (keys in a Secret of the management cluster), and a real registry that notifies it.
type notifyEnv struct {
	shard    string
	url      string // the receiver's base URL
	registry *testenv.Registry
	metrics  *prometheus.Registry
	// keys of the sources distribution and generic.
	distribution, generic string
}

func startNotifyEnv(t *testing.T, shard string) *notifyEnv {
	t.Helper()
	ns := newNamespace(t)
	env := &notifyEnv{shard: shard, metrics: prometheus.NewRegistry(), distribution: "dist-" + ns, generic: "generic-" + ns}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pkgsync-webhook"},
		Data: map[string][]byte{"distribution": []byte(env.distribution), "generic": []byte(env.generic)}}
	require.NoError(t, suite.mgmtClient.Create(t.Context(), secret))

	wakes := wakes.NewRegistryWakes()
	runShardController(t, shard, func(o *reconciler.Options) { o.Wakes = wakes })
	m, err := receiver.NewMetrics(env.metrics)
	require.NoError(t, err)
	listening := make(chan net.Addr, 1)
	srv := &receiver.Server{Addr: "127.0.0.1:0", Listening: func(a net.Addr) { listening <- a }, Handler: receiver.New(receiver.Options{
		Keys:  &receiver.SecretKeys{Reader: suite.mgmtClient, Secret: client.ObjectKeyFromObject(secret)},
		Waker: wakes, Metrics: m,
	})}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Start(ctx) }()
	t.Cleanup(func() { cancel(); assert.NoError(t, <-served) })
	select {
	case addr := <-listening:
		env.url = "http://" + addr.String()
	case err := <-served:
		require.NoError(t, err)
	}
	env.registry = testenv.NewRegistry(t, testenv.RegistryOptions{NotifyURL: env.url + receiver.PathPrefix + "distribution", NotifyToken: env.distribution})
	return env
}

// follow creates a Package of the env's shard following image with a 10-minute interval: only
// a wake makes it look again within a test.
func (env *notifyEnv) follow(t *testing.T, image string) *v1alpha1.Package {
	t.Helper()
	pkg := newPackage(newNamespace(t), "follower", image, "")
	pkg.Labels = map[string]string{shardLabel: env.shard}
	pkg.Spec.Interval = &metav1.Duration{Duration: 10 * time.Minute}
	createPackage(t, pkg)
	return pkg
}

// post sends a notification to the receiver and returns the status code.
func (env *notifyEnv) post(t *testing.T, source receiver.Source, body string, header map[string]string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, env.url+receiver.PathPrefix+string(source), strings.NewReader(body))
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	return resp.StatusCode
}

// requests reads pkgsync_webhook_requests_total{source,outcome}.
func (env *notifyEnv) requests(t testingT, source receiver.Source, outcome string) float64 {
	t.Helper()
	families, err := env.metrics.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "pkgsync_webhook_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["source"] == string(source) && labels["outcome"] == outcome {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// waitReadyOnDigest waits until the Package is Ready on digest.
func waitReadyOnDigest(t *testing.T, pkg *v1alpha1.Package, digest string) {
	t.Helper()
	eventually(t, func(a *attempt) {
		c := readyCondition(a, pkg)
		if !assert.NotNil(a, c) {
			return
		}
		assert.Equal(a, metav1.ConditionTrue, c.Status, c.Message)
		assert.Equal(a, digest, pkg.Status.LastAppliedRevision)
		assert.Equal(a, digest, pkg.Status.LastAttemptedRevision)
	}, "%s/%s applies %s", pkg.Namespace, pkg.Name, digest)
}

// tagHeads counts the tag resolutions (HEAD of the manifest by tag) of repo:tag.
func tagHeads(repo, tag string) int {
	return suite.registryRequests.count(http.MethodHead, "/v2/"+repo+"/manifests/"+tag)
}

// TestRegistryNotifications runs the receiver against the real registry's notifications: an
// authenticated push wakes the Packages following the tag, which converge on the new digest
// long before their interval; unauthenticated requests wake nothing and are counted; a digest
// in a payload is never used; a burst costs one resolution at once and one at the end of the
// second; a repository nobody follows costs no registry request.
func TestRegistryNotifications(t *testing.T) {
	t.Parallel()
	env := startNotifyEnv(t, "notify")

	t.Run("authenticated-push-wakes", func(t *testing.T) {
		repo, image, pkg, first := env.followNew(t)
		before := tagHeads(repo, "v1")
		second := pushPackageTo(t, writePackage(t, versionedPackage("2")), image)
		require.NotEqual(t, first, second)
		waitReadyOnDigest(t, pkg, second)
		// Distribution sends its event before it moves the tag: a resolution that does not show
		// the digest the event named yet looks again a second later.
		assert.GreaterOrEqual(t, tagHeads(repo, "v1"), before+1)
		assert.LessOrEqual(t, tagHeads(repo, "v1"), before+1+3, "one resolution, and one per second until the tag moved")
		assert.GreaterOrEqual(t, env.requests(t, receiver.Distribution, receiver.OutcomeWoke), 1.0)
	})

	t.Run("unauthenticated-is-refused-and-counted", func(t *testing.T) {
		repo, _, pkg, first := env.followNew(t)
		before := tagHeads(repo, "v1")
		envelope := `{"events":[{"action":"push","target":{"repository":"` + repo + `","tag":"v1"}}]}`
		assert.Equal(t, http.StatusUnauthorized, env.post(t, receiver.Distribution, envelope, nil))
		assert.Equal(t, http.StatusUnauthorized, env.post(t, receiver.Distribution, envelope, map[string]string{"Authorization": "Bearer " + env.generic}))
		assert.Equal(t, http.StatusUnauthorized, env.post(t, receiver.Generic, `{"repository":"`+repo+`","tag":"v1"}`,
			map[string]string{receiver.SignatureHeader: "sha256=" + zeroHex}))
		assert.Equal(t, 2.0, env.requests(t, receiver.Distribution, receiver.OutcomeUnauthenticated))
		assert.Equal(t, 1.0, env.requests(t, receiver.Generic, receiver.OutcomeUnauthenticated))

		// A registry that sends the wrong token: its notifications are refused and counted too.
		wrong := testenv.NewRegistry(t, testenv.RegistryOptions{NotifyURL: env.url + receiver.PathPrefix + "distribution", NotifyToken: "not-the-token"})
		pushPackageTo(t, writePackage(t, versionedPackage("3")), wrong.Host+"/"+repo+":v1")
		eventually(t, func(a *attempt) {
			assert.Greater(a, env.requests(a, receiver.Distribution, receiver.OutcomeUnauthenticated), 2.0)
		}, "the registry's notification is refused")
		assert.Equal(t, before, tagHeads(repo, "v1"), "nothing resolved")
		require.NoError(t, suite.mgmtClient.Get(t.Context(), client.ObjectKeyFromObject(pkg), pkg))
		assert.Equal(t, first, pkg.Status.LastAppliedRevision)
	})

	t.Run("a-digest-in-the-payload-is-not-used", func(t *testing.T) {
		repo, _, pkg, first := env.followNew(t)
		forged := "sha256:" + strings.Repeat("f", 64)
		before := tagHeads(repo, "v1")
		assert.Equal(t, http.StatusAccepted, env.post(t, receiver.Generic, `{"repository":"`+repo+`","tag":"v1","digest":"`+forged+`"}`,
			map[string]string{"Authorization": "Bearer " + env.generic}))
		eventually(t, func(a *attempt) {
			assert.Equal(a, before+1, tagHeads(repo, "v1"))
		}, "the tag is resolved from the registry, once")
		waitReadyOnDigest(t, pkg, first)

		// Distribution's event names a digest, which is only a hint to look again while the
		// registry does not show it yet: a forged one costs 3 more resolutions, a second apart.
		before = tagHeads(repo, "v1")
		envelope := `{"events":[{"action":"push","target":{"repository":"` + repo + `","tag":"v1","digest":"` + forged + `"}}]}`
		assert.Equal(t, http.StatusAccepted, env.post(t, receiver.Distribution, envelope, map[string]string{"Authorization": "Bearer " + env.distribution}))
		eventually(t, func(a *attempt) {
			assert.Equal(a, before+1+3, tagHeads(repo, "v1"))
		}, "looked again three times")
		waitReadyOnDigest(t, pkg, first)
		assert.NotEqual(t, forged, pkg.Status.LastAttemptedRevision)
		t.Cleanup(func() { assert.Equal(t, before+1+3, tagHeads(repo, "v1"), "and no more") })
	})

	t.Run("a-burst-costs-one-resolution-per-second", func(t *testing.T) {
		repo, _, _, _ := env.followNew(t)
		before := tagHeads(repo, "v1")
		const burst = 30
		start := time.Now()
		for range burst {
			require.Equal(t, http.StatusAccepted, env.post(t, receiver.Generic, `{"repository":"`+repo+`","tag":"v1"}`,
				map[string]string{"Authorization": "Bearer " + env.generic}))
		}
		// One at once, one at the end of each second the burst lasted.
		most := before + 2 + int(time.Since(start)/time.Second)
		eventually(t, func(a *attempt) {
			assert.GreaterOrEqual(a, tagHeads(repo, "v1"), before+2)
		}, "the burst's first and last notification are answered")
		assert.LessOrEqual(t, tagHeads(repo, "v1"), most, "%d notifications", burst)
		t.Cleanup(func() { assert.LessOrEqual(t, tagHeads(repo, "v1"), most, "no resolution later either") })
	})

	t.Run("unknown-repository-costs-no-registry-request", func(t *testing.T) {
		unfollowed := "e2e/" + newNamespace(t) + "/nobody"
		before := env.requests(t, receiver.Distribution, receiver.OutcomeUnfollowed)
		pushPackageTo(t, writePackage(t, versionedPackage("1")), env.registry.Host+"/"+unfollowed+":v1")
		headsAfterPush := tagHeads(unfollowed, "v1")
		eventually(t, func(a *attempt) {
			assert.Greater(a, env.requests(a, receiver.Distribution, receiver.OutcomeUnfollowed), before)
		}, "the registry's notification is received")
		before = env.requests(t, receiver.Generic, receiver.OutcomeUnfollowed)
		assert.Equal(t, http.StatusAccepted, env.post(t, receiver.Generic, `{"repository":"`+unfollowed+`"}`,
			map[string]string{"Authorization": "Bearer " + env.generic}))
		assert.Equal(t, before+1, env.requests(t, receiver.Generic, receiver.OutcomeUnfollowed))
		assert.Equal(t, headsAfterPush, tagHeads(unfollowed, "v1"), "no resolution")
		assert.Zero(t, suite.registryRequests.tagLists(unfollowed), "no listing")
	})
}

// followNew pushes a package to a repository of its own on the notifying registry, waits until
// the registry's notification of it is in (nobody follows it yet), then creates a Package
// following it and waits until it is Ready on that digest.
func (env *notifyEnv) followNew(t *testing.T) (repo, image string, pkg *v1alpha1.Package, digest string) {
	t.Helper()
	repo = "e2e/" + newNamespace(t) + "/app"
	image = env.registry.Host + "/" + repo + ":v1"
	unfollowed := env.requests(t, receiver.Distribution, receiver.OutcomeUnfollowed)
	digest = pushPackageTo(t, writePackage(t, versionedPackage("1")), image)
	eventually(t, func(a *attempt) {
		assert.Greater(a, env.requests(a, receiver.Distribution, receiver.OutcomeUnfollowed), unfollowed)
	}, "the push's notification is in before anyone follows the repository")
	pkg = env.follow(t, image)
	waitReadyOnDigest(t, pkg, digest)
	return repo, image, pkg, digest
}

// TestWebhookFlags runs `pkgsync controller --webhook-bind-address --webhook-secret`: a generic
// notification with the Secret's key wakes a Package on a 10-minute interval, which converges on
// the pushed digest; one without is refused; both are counted on /metrics, and so is the time
// from the notification to the resolution.
func TestWebhookFlags(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	key := "generic-" + ns
	require.NoError(t, suite.mgmtClient.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hooks"},
		Data: map[string][]byte{"generic": []byte(key)}}))
	addr := refusedAddress(t)
	proc := runController(t, "webhook", "--webhook-bind-address", addr, "--webhook-secret", ns+"/hooks")

	repo := "e2e/" + ns + "/app"
	image := suite.registry.Host + "/" + repo + ":v1"
	first := pushPackage(t, writePackage(t, versionedPackage("1")), repo+":v1")
	pkg := newPackage(newNamespace(t), "follower", image, "")
	pkg.Labels = map[string]string{shardLabel: "webhook"}
	pkg.Spec.Interval = &metav1.Duration{Duration: 10 * time.Minute}
	createPackage(t, pkg)
	waitReadyOnDigest(t, pkg, first)

	second := pushPackage(t, writePackage(t, versionedPackage("2")), repo+":v1")
	notify := func(header map[string]string) (int, error) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+addr+"/hooks/generic",
			strings.NewReader(`{"repository":"`+image[:strings.LastIndex(image, ":")]+`","tag":"v1"}`))
		if err != nil {
			return 0, err
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		return resp.StatusCode, resp.Body.Close()
	}
	eventually(t, func(a *attempt) {
		status, err := notify(nil)
		require.NoError(a, err, "the receiver listens once the controller leads")
		assert.Equal(a, http.StatusUnauthorized, status)
	})
	status, err := notify(map[string]string{"Authorization": "Bearer " + key})
	require.NoError(t, err)
	assert.Equal(t, http.StatusAccepted, status)
	waitReadyOnDigest(t, pkg, second)

	atLeast := func(want float64) func(float64) bool { return func(v float64) bool { return v >= want } }
	waitForMetric(t, proc, "pkgsync_webhook_requests_total", map[string]string{"source": "generic", "outcome": "unauthenticated"}, ">= 1", atLeast(1))
	waitForMetric(t, proc, "pkgsync_webhook_requests_total", map[string]string{"source": "generic", "outcome": "woke"}, "1", atLeast(1))
	waitForMetric(t, proc, "pkgsync_webhook_resolution_seconds", nil, "1 observation", atLeast(1))
}
