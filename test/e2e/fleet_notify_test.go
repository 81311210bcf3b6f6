package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/controller"
	"pkgsync.dev/pkgsync/internal/notify"
	"pkgsync.dev/pkgsync/internal/reconciler"
)

// webhookEndpoint is an HTTPS endpoint that keeps the reasons of the notifications it was
// sent, checking each generic one's HMAC against key.
type webhookEndpoint struct {
	*httptest.Server
	key     string
	mu      sync.Mutex
	reasons []string
	badMACs int
}

func newWebhookEndpoint(t *testing.T, key string) *webhookEndpoint {
	t.Helper()
	e := &webhookEndpoint{key: key}
	e.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.key != "" {
			mac := hmac.New(sha256.New, []byte(e.key))
			mac.Write(body)
			if r.Header.Get(notify.SignatureHeader) != "sha256="+hex.EncodeToString(mac.Sum(nil)) {
				e.badMACs++
			}
			var event eventv1.Event
			if json.Unmarshal(body, &event) == nil {
				e.reasons = append(e.reasons, event.Reason)
			}
			return
		}
		var msg struct{ Text string }
		if json.Unmarshal(body, &msg) == nil {
			e.reasons = append(e.reasons, msg.Text)
		}
	}))
	t.Cleanup(e.Close)
	return e
}

func (e *webhookEndpoint) got() (reasons []string, badMACs int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.reasons...), e.badMACs
}

func (e *webhookEndpoint) endpoint(name string, typ notify.EndpointType, reasons ...string) notify.Endpoint {
	return notify.Endpoint{Name: name, Type: typ, Address: e.URL + "/hook", HMACKey: e.key, Reasons: reasons,
		CAPEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: e.Certificate().Raw}))}
}

// TestFleetNotifications rolls a fleet through a first rollout, a broken revision that halts
// in the canary partition and a fixed one that resumes it, with the operator's notification
// Secret naming a signed generic endpoint (the default reasons) and a Slack-compatible one
// (the partition events): every fleet event of the rollout is recorded, and the endpoints are
// told of exactly what they asked for, over real HTTPS.
func TestFleetNotifications(t *testing.T) {
	t.Parallel()
	const shard = "fleet-notify"
	controllerNS := newNamespace(t)
	generic := newWebhookEndpoint(t, "hmac-key-of-the-platform-team")
	slack := newWebhookEndpoint(t, "")
	data, err := yaml.Marshal(notify.Config{Endpoints: []notify.Endpoint{
		generic.endpoint("audit", notify.Generic),
		slack.endpoint("chat", notify.Slack, v1alpha1.PartitionStartedReason, v1alpha1.PartitionCompleteReason, v1alpha1.RolloutResumedReason),
	}})
	require.NoError(t, err)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: "pkgsync-notifications"}, Data: map[string][]byte{notify.ConfigKey: data}}
	require.NoError(t, suite.mgmtClient.Create(t.Context(), secret))
	notifier := &notify.Notifier{Reader: suite.mgmtClient, Secret: client.ObjectKeyFromObject(secret), Log: ctrl.Log.WithName("notify")}
	runShardControllerConfigured(t, shard, func(c *controller.Config) { c.Notifier = notifier }, func(o *reconciler.Options) { o.Namespace = controllerNS })

	hcNamespace := newNamespace(t)
	newFleetClusters(t, hcNamespace, hcNamespace, "canary", "prod", "prod")
	repo := "fleet-notify/" + hcNamespace
	push := func(version string, broken bool) string {
		t.Helper()
		return pushPackageTo(t, writePackage(t, fleetPackage(version, broken)), suite.registry.Host+"/"+repo+":stable")
	}
	v1 := push("1", false)
	one := intstr.FromInt32(1)
	labels := map[string]string{shardLabel: shard}
	fleet := &v1alpha1.HostedClusterPackage{
		ObjectMeta: metav1.ObjectMeta{Name: "notify-" + hcNamespace[len(hcNamespace)-8:], Labels: labels},
		Spec: v1alpha1.HostedClusterPackageSpec{
			HostedClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"e2e.pkgsync.dev/fleet": hcNamespace}},
			Template: v1alpha1.PackageTemplate{
				Metadata: v1alpha1.TemplateMetadata{Labels: labels},
				Spec:     v1alpha1.PackageSpec{Image: suite.registry.Host + "/" + repo + ":stable", Interval: &metav1.Duration{Duration: time.Hour}},
			},
			Rollout: v1alpha1.FleetRolloutStrategy{
				MaxUnavailable:   &one,
				Partitions:       &v1alpha1.FleetPartitions{LabelKey: "rollout-wave", Order: &v1alpha1.PartitionOrder{Static: []string{"canary", "prod"}}},
				ProgressDeadline: &metav1.Duration{Duration: time.Minute},
			},
		},
	}
	newFleet(t, fleet)
	waitForFleet(t, fleet.Name, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, v1)
	v2 := push("2", true)
	requestFleetReconcile(t, fleet)
	waitForFleet(t, fleet.Name, metav1.ConditionFalse, v1alpha1.RolloutHaltedReason, v2)
	v3 := push("3", false)
	requestFleetReconcile(t, fleet)
	waitForFleet(t, fleet.Name, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, v3)

	// Every event of the rollouts is recorded: two partitions started and completed twice
	// (v1, v3), the halt of v2 in the canaries, its resumption by v3.
	eventually(t, func(a *attempt) {
		assert.GreaterOrEqual(a, fleetEvents(a, a.Context(), fleet.Name, corev1.EventTypeNormal, v1alpha1.PartitionStartedReason), int32(3))
		assert.GreaterOrEqual(a, fleetEvents(a, a.Context(), fleet.Name, corev1.EventTypeNormal, v1alpha1.PartitionCompleteReason), int32(4))
		assert.Positive(a, fleetEvents(a, a.Context(), fleet.Name, corev1.EventTypeWarning, v1alpha1.RolloutHaltedReason))
		assert.Positive(a, fleetEvents(a, a.Context(), fleet.Name, corev1.EventTypeNormal, v1alpha1.RolloutResumedReason))
		assert.Equal(a, int32(2), fleetEvents(a, a.Context(), fleet.Name, corev1.EventTypeNormal, v1alpha1.ReconciliationSucceededReason), "one completion per rollout")
	}, "the fleet's events")

	// The generic endpoint is told of the halt and of both completions, each request signed.
	eventually(t, func(a *attempt) {
		reasons, badMACs := generic.got()
		assert.Zero(a, badMACs, "requests whose signature is not the body's HMAC")
		assert.Equal(a, 2, count(reasons, v1alpha1.ReconciliationSucceededReason), "%v", reasons)
		assert.Positive(a, count(reasons, v1alpha1.RolloutHaltedReason), "%v", reasons)
		for _, r := range reasons {
			assert.Contains(a, notify.DefaultReasons, r, "only the default reasons")
		}
	}, "the generic endpoint's notifications")
	// The chat endpoint is told of the partitions, in Slack's message form.
	eventually(t, func(a *attempt) {
		texts, _ := slack.got()
		joined := ""
		for _, text := range texts {
			joined += text + "\n"
		}
		assert.Contains(a, joined, "*PartitionStarted* HostedClusterPackage "+fleet.Name+": partition canary: rolling out")
		assert.Contains(a, joined, "*PartitionComplete* HostedClusterPackage "+fleet.Name+": partition prod: every member Ready on")
		assert.Contains(a, joined, "*RolloutResumed* HostedClusterPackage "+fleet.Name+": partition canary")
		assert.NotContains(a, joined, "RolloutHalted", "a reason the endpoint did not list")
	}, "the chat endpoint's notifications")
}

func count(values []string, want string) int {
	n := 0
	for _, v := range values {
		if v == want {
			n++
		}
	}
	return n
}
