package notify

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// endpointServer is a real HTTPS endpoint that keeps what it was sent.
type endpointServer struct {
	*httptest.Server
	mu       sync.Mutex
	requests []received
	answer   func(w http.ResponseWriter) // nil answers 200
}

type received struct {
	header http.Header
	body   []byte
}

func newEndpointServer(t *testing.T) *endpointServer {
	t.Helper()
	s := &endpointServer{}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		s.mu.Lock()
		s.requests = append(s.requests, received{header: r.Header.Clone(), body: body})
		answer := s.answer
		s.mu.Unlock()
		if answer != nil {
			answer(w)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *endpointServer) got() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]received(nil), s.requests...)
}

func (s *endpointServer) caPEM() string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw}))
}

// startNotifier runs a Notifier over a Secret holding endpoints, until the test ends.
func startNotifier(t *testing.T, log logr.Logger, endpoints ...Endpoint) (*Notifier, client.Client) {
	t.Helper()
	data, err := yaml.Marshal(Config{Endpoints: endpoints})
	require.NoError(t, err)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "pkgsync-system", Name: "pkgsync-notifications"},
		Data: map[string][]byte{ConfigKey: data}}
	c := fake.NewClientBuilder().WithObjects(secret).Build()
	n := &Notifier{Reader: c, Secret: client.ObjectKeyFromObject(secret), Log: log, Refresh: 50 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = n.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		n.mu.Lock()
		defer n.mu.Unlock()
		assert.Len(c, n.endpoints, len(endpoints))
	}, 10*time.Second, 10*time.Millisecond)
	return n, c
}

func fleetEvent(reason, message string) Notification {
	return Notification{
		Object:    corev1.ObjectReference{Kind: "HostedClusterPackage", APIVersion: v1alpha1.GroupVersion.String(), Name: "network", UID: "uid-1"},
		EventType: corev1.EventTypeWarning, Reason: reason, Message: message, Time: time.Now(),
	}
}

func TestGenericNotificationIsAFluxEventSignedWithTheKey(t *testing.T) {
	t.Parallel()
	srv := newEndpointServer(t)
	n, _ := startNotifier(t, logr.Discard(), Endpoint{Name: "audit", Type: Generic, Address: srv.URL + "/hook", HMACKey: "s3cret", CAPEM: srv.caPEM()})

	n.Notify(fleetEvent(v1alpha1.RolloutHaltedReason, "partition canary: rollout of sha256:abc halted"))
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Len(c, srv.got(), 1) }, 10*time.Second, 10*time.Millisecond)

	got := srv.got()[0]
	mac := hmac.New(sha256.New, []byte("s3cret"))
	mac.Write(got.body)
	assert.Equal(t, "sha256="+hex.EncodeToString(mac.Sum(nil)), got.header.Get(SignatureHeader), "Flux's generic-hmac signature of the body")
	assert.Equal(t, "application/json", got.header.Get("Content-Type"))
	var event eventv1.Event
	require.NoError(t, json.Unmarshal(got.body, &event))
	assert.Equal(t, "HostedClusterPackage", event.InvolvedObject.Kind)
	assert.Equal(t, "network", event.InvolvedObject.Name)
	assert.Equal(t, eventv1.EventSeverityError, event.Severity)
	assert.Equal(t, v1alpha1.RolloutHaltedReason, event.Reason)
	assert.Equal(t, "partition canary: rollout of sha256:abc halted", event.Message)
	assert.Equal(t, "pkgsync", event.ReportingController)
}

func TestSlackNotificationIsAnIncomingWebhookMessage(t *testing.T) {
	t.Parallel()
	srv := newEndpointServer(t)
	n, _ := startNotifier(t, logr.Discard(), Endpoint{Name: "chat", Type: Slack, Address: srv.URL + "/services/T/B/X", CAPEM: srv.caPEM()})

	n.Notify(fleetEvent(v1alpha1.RolledBackReason, "members are back on stable revision sha256:abc"))
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Len(c, srv.got(), 1) }, 10*time.Second, 10*time.Millisecond)

	var msg map[string]string
	require.NoError(t, json.Unmarshal(srv.got()[0].body, &msg))
	assert.Equal(t, "[error] *RolledBack* HostedClusterPackage network: members are back on stable revision sha256:abc", msg["text"])
	assert.Empty(t, srv.got()[0].header.Get(SignatureHeader))
}

func TestOnlyTheChosenKindsAndReasonsAreSent(t *testing.T) {
	t.Parallel()
	srv := newEndpointServer(t)
	partitions := newEndpointServer(t)
	n, _ := startNotifier(t, logr.Discard(),
		Endpoint{Name: "defaults", Type: Generic, Address: srv.URL, CAPEM: srv.caPEM()},
		Endpoint{Name: "partitions", Type: Generic, Address: partitions.URL, CAPEM: partitions.caPEM(),
			Reasons: []string{v1alpha1.PartitionStartedReason}, Kinds: []string{"HostedClusterPackage", "Package"}})

	n.Notify(fleetEvent(v1alpha1.PartitionStartedReason, "partition canary: rolling out sha256:abc"))
	pkg := fleetEvent(v1alpha1.RolloutHaltedReason, "a Package's own reason")
	pkg.Object.Kind = "Package"
	n.Notify(pkg)
	n.Notify(fleetEvent(v1alpha1.ReconciliationSucceededReason, "rolled out sha256:abc"))

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Len(c, srv.got(), 1)
		assert.Len(c, partitions.got(), 1)
	}, 10*time.Second, 10*time.Millisecond)
	assert.Contains(t, string(srv.got()[0].body), `"reason":"ReconciliationSucceeded"`, "completion is a default reason; a partition's start is not, nor a Package's events")
	assert.Contains(t, string(partitions.got()[0].body), `"reason":"PartitionStarted"`)
}

func TestARepeatedEventIsSentOncePerWindow(t *testing.T) {
	t.Parallel()
	srv := newEndpointServer(t)
	n, _ := startNotifier(t, logr.Discard(), Endpoint{Name: "dedup", Type: Generic, Address: srv.URL, CAPEM: srv.caPEM()})

	halted := fleetEvent(v1alpha1.RolloutHaltedReason, "partition canary: rollout of sha256:abc halted")
	for range 5 {
		n.Notify(halted)
	}
	other := fleetEvent(v1alpha1.RolloutHaltedReason, "partition late: rollout of sha256:abc halted")
	n.Notify(other)
	later := halted
	later.Time = halted.Time.Add(DefaultDedupWindow)
	n.Notify(later)

	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Len(c, srv.got(), 3) }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, 4.0, testutil.ToFloat64(notifications.WithLabelValues("dedup", "deduplicated")))
}

func TestNotifyNeverWaitsForASlowEndpoint(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := newEndpointServer(t)
	srv.answer = func(http.ResponseWriter) { <-release }
	t.Cleanup(func() { close(release) })
	n, _ := startNotifier(t, logr.Discard(), Endpoint{Name: "stuck", Type: Generic, Address: srv.URL, CAPEM: srv.caPEM()})

	returned := make(chan struct{})
	go func() {
		defer close(returned)
		for i := range 2 * queueLength {
			n.Notify(fleetEvent(v1alpha1.RolloutHaltedReason, strings.Repeat("x", i)))
		}
	}()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		select {
		case <-returned:
		default:
			assert.Fail(c, "Notify waits for the endpoint")
		}
	}, 10*time.Second, 10*time.Millisecond)
	assert.Positive(t, testutil.ToFloat64(notifications.WithLabelValues("stuck", "dropped")), "what does not fit the queue is dropped and counted")
}

func TestAFailedNotificationIsRetriedAndLoggedWithoutItsAddress(t *testing.T) {
	t.Parallel()
	srv := newEndpointServer(t)
	srv.answer = func(w http.ResponseWriter) { w.WriteHeader(http.StatusServiceUnavailable) }
	var mu sync.Mutex
	var logs []string
	log := funcr.New(func(prefix, args string) { mu.Lock(); logs = append(logs, args); mu.Unlock() }, funcr.Options{})
	n, _ := startNotifier(t, log, Endpoint{Name: "flaky", Type: Slack, Address: srv.URL + "/services/T/B/SECRET", CAPEM: srv.caPEM()})
	n.mu.Lock()
	for _, s := range n.endpoints {
		s.backoff = func(int) time.Duration { return time.Millisecond }
	}
	n.mu.Unlock()

	n.Notify(fleetEvent(v1alpha1.RollingBackReason, "moving members back"))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, 1.0, testutil.ToFloat64(notifications.WithLabelValues("flaky", "failed")))
	}, 10*time.Second, 10*time.Millisecond)
	assert.Len(t, srv.got(), attempts, "a 503 is retried")
	mu.Lock()
	defer mu.Unlock()
	joined := strings.Join(logs, "\n")
	assert.Contains(t, joined, "flaky")
	assert.Contains(t, joined, "503")
	assert.NotContains(t, joined, "SECRET", "a Slack address is a credential")
	assert.NotContains(t, joined, srv.URL)
}

func TestARedirectIsNotFollowed(t *testing.T) {
	t.Parallel()
	target := newEndpointServer(t)
	srv := newEndpointServer(t)
	srv.answer = func(w http.ResponseWriter) {
		w.Header().Set("Location", target.URL)
		w.WriteHeader(http.StatusTemporaryRedirect)
	}
	n, _ := startNotifier(t, logr.Discard(), Endpoint{Name: "redirect", Type: Generic, Address: srv.URL, HMACKey: "k", CAPEM: srv.caPEM()})

	n.Notify(fleetEvent(v1alpha1.RolloutHaltedReason, "halted"))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, 1.0, testutil.ToFloat64(notifications.WithLabelValues("redirect", "failed")))
	}, 10*time.Second, 10*time.Millisecond)
	assert.Empty(t, target.got(), "the signed body goes only where the operator said")
}

func TestAChangedSecretIsTakenAndABrokenOneKeepsTheEndpoints(t *testing.T) {
	t.Parallel()
	first, second := newEndpointServer(t), newEndpointServer(t)
	n, c := startNotifier(t, logr.Discard(), Endpoint{Name: "first", Type: Generic, Address: first.URL, CAPEM: first.caPEM()})
	setConfig := func(data string) {
		t.Helper()
		secret := &corev1.Secret{}
		require.NoError(t, c.Get(t.Context(), n.Secret, secret))
		secret.Data[ConfigKey] = []byte(data)
		require.NoError(t, c.Update(t.Context(), secret))
	}
	endpointNames := func() []string {
		n.mu.Lock()
		defer n.mu.Unlock()
		var names []string
		for _, s := range n.endpoints {
			names = append(names, s.Name)
		}
		return names
	}

	data, err := yaml.Marshal(Config{Endpoints: []Endpoint{{Name: "second", Type: Generic, Address: second.URL, CAPEM: second.caPEM()}}})
	require.NoError(t, err)
	setConfig(string(data))
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Equal(c, []string{"second"}, endpointNames()) }, 10*time.Second, 10*time.Millisecond)
	n.Notify(fleetEvent(v1alpha1.RolloutHaltedReason, "halted"))
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Len(c, second.got(), 1) }, 10*time.Second, 10*time.Millisecond)
	assert.Empty(t, first.got())

	setConfig("endpoints:\n- name: typo\n  type: generic\n  url: https://x\n")
	// Several refreshes (50ms each) pass; the broken configuration is never taken.
	require.Never(t, func() bool { return len(endpointNames()) != 1 || endpointNames()[0] != "second" }, 300*time.Millisecond, 20*time.Millisecond)
}

func TestParseConfigRefusesWhatWouldLeakOrNeverWork(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ config, want string }{
		"plain http":            {"endpoints:\n- {name: a, type: generic, address: 'http://hooks.example.com'}\n", "want an https:// URL"},
		"credentials in url":    {"endpoints:\n- {name: a, type: generic, address: 'https://u:p@hooks.example.com'}\n", "credentials in the URL"},
		"unknown field":         {"endpoints:\n- {name: a, type: generic, url: 'https://hooks.example.com'}\n", `unknown field "url"`},
		"unknown type":          {"endpoints:\n- {name: a, type: teams, address: 'https://hooks.example.com'}\n", `type "teams": want generic or slack`},
		"same name twice":       {"endpoints:\n- {name: a, type: slack, address: 'https://h'}\n- {name: a, type: slack, address: 'https://h'}\n", "endpoints[1] (a): name is used twice"},
		"hmac on slack":         {"endpoints:\n- {name: a, type: slack, address: 'https://h', hmacKey: k}\n", "hmacKey signs generic requests only"},
		"no name, no address":   {"endpoints:\n- {type: slack}\n", "name is required"},
		"too many endpoints":    {"endpoints:\n" + strings.Repeat("- {name: a, type: slack, address: 'https://h'}\n", maxEndpoints+1), "over the limit of 16"},
		"configuration too big": {strings.Repeat("#", maxConfigBytes+1), "over the limit"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.config))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestTheRecorderRecordsAndNotifies(t *testing.T) {
	t.Parallel()
	srv := newEndpointServer(t)
	n, _ := startNotifier(t, logr.Discard(), Endpoint{Name: "recorder", Type: Generic, Address: srv.URL, CAPEM: srv.caPEM()})
	scheme := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	inner := record.NewFakeRecorder(10)
	rec := &Recorder{EventRecorder: inner, Notifier: n, Scheme: scheme}

	fleet := &v1alpha1.HostedClusterPackage{ObjectMeta: metav1.ObjectMeta{Name: "network", UID: "u"}}
	rec.Eventf(fleet, corev1.EventTypeWarning, v1alpha1.RolloutHaltedReason, "partition %s: rollout of %s halted", "canary", "sha256:abc")

	assert.Equal(t, "Warning RolloutHalted partition canary: rollout of sha256:abc halted", <-inner.Events)
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Len(c, srv.got(), 1) }, 10*time.Second, 10*time.Millisecond)
	var event eventv1.Event
	require.NoError(t, json.Unmarshal(srv.got()[0].body, &event))
	assert.Equal(t, "HostedClusterPackage", event.InvolvedObject.Kind, "the kind comes from the scheme: typed objects carry no TypeMeta")
	assert.Equal(t, "partition canary: rollout of sha256:abc halted", event.Message)
}

func TestALongMessageIsCut(t *testing.T) {
	t.Parallel()
	body, err := fleetEvent(v1alpha1.RolloutHaltedReason, strings.Repeat("é", 5000)).body(Slack)
	require.NoError(t, err)
	var msg map[string]string
	require.NoError(t, json.Unmarshal(body, &msg))
	assert.LessOrEqual(t, len(msg["text"]), maxMessageBytes+64)
	assert.True(t, strings.HasSuffix(msg["text"], "…(truncated)"))
}

func TestASlackMessageCannotCarryMarkup(t *testing.T) {
	t.Parallel()
	body, err := fleetEvent(v1alpha1.RolloutHaltedReason, "webhook said <!channel> see <https://evil.example|Approve> & more").body(Slack)
	require.NoError(t, err)
	var msg map[string]string
	require.NoError(t, json.Unmarshal(body, &msg))
	assert.Contains(t, msg["text"], "webhook said &lt;!channel&gt; see &lt;https://evil.example|Approve&gt; &amp; more")
}

func TestAFailedDialIsLoggedWithoutTheAddress(t *testing.T) {
	t.Parallel()
	srv := newEndpointServer(t)
	var mu sync.Mutex
	var logs []string
	log := funcr.New(func(prefix, args string) { mu.Lock(); logs = append(logs, args); mu.Unlock() }, funcr.Options{})
	// The endpoint's certificate is not trusted (no caPEM): the TLS handshake fails, and the
	// client's error would quote the URL.
	n, _ := startNotifier(t, log, Endpoint{Name: "untrusted", Type: Slack, Address: srv.URL + "/services/T/B/SECRET"})
	n.mu.Lock()
	for _, s := range n.endpoints {
		s.backoff = func(int) time.Duration { return time.Millisecond }
	}
	n.mu.Unlock()
	n.Notify(fleetEvent(v1alpha1.RollingBackReason, "moving members back"))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, 1.0, testutil.ToFloat64(notifications.WithLabelValues("untrusted", "failed")))
	}, 10*time.Second, 10*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	joined := strings.Join(logs, "\n")
	assert.Contains(t, joined, "certificate")
	assert.NotContains(t, joined, "SECRET")
	assert.Empty(t, srv.got(), "nothing is sent to an endpoint whose certificate is not trusted")
}
