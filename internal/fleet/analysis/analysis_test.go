package analysis

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/hosted"
)

// prometheusServer serves the Prometheus HTTP API's instant queries over real HTTPS: answer
// gives the response body for a query.
type prometheusServer struct {
	*httptest.Server
	mu      sync.Mutex
	queries []string
	tokens  []string
}

func newPrometheusServer(t *testing.T, answer func(query string) (int, string)) *prometheusServer {
	t.Helper()
	p := &prometheusServer{}
	p.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/query" {
			http.NotFound(w, r)
			return
		}
		_ = r.ParseForm()
		p.mu.Lock()
		p.queries = append(p.queries, r.Form.Get("query"))
		p.tokens = append(p.tokens, r.Header.Get("Authorization"))
		p.mu.Unlock()
		code, body := answer(r.Form.Get("query"))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *prometheusServer) client(t *testing.T, token string) *Prometheus {
	t.Helper()
	prom, err := NewPrometheus(p.URL, func() (string, error) { return token, nil }, p.Client().Transport)
	require.NoError(t, err)
	return prom
}

// vector is a success response with one sample per namespace and value.
func vector(values map[string]string) string {
	var result []map[string]any
	for ns, v := range values {
		metric := map[string]string{"__name__": "errors"}
		if ns != "" {
			metric["namespace"] = ns
		}
		result = append(result, map[string]any{"metric": metric, "value": []any{1.7e9, v}})
	}
	b, _ := json.Marshal(map[string]any{"status": "success", "data": map[string]any{"resultType": "vector", "result": result}})
	return string(b)
}

func subjects(namespaces ...string) []Subject {
	var out []Subject
	for _, ns := range namespaces {
		p := &v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{Name: "addon", Namespace: ns, Labels: map[string]string{"tier": "gold"}}}
		p.Status.Conditions = []metav1.Condition{{Type: meta.ReadyCondition, Status: metav1.ConditionTrue, Reason: v1alpha1.ReconciliationSucceededReason}}
		out = append(out, Subject{Namespace: ns, Pkg: p, Cluster: &hosted.HostedCluster{Name: ns, Namespace: "clusters", Available: true, Labels: map[string]string{"region": "eu"}}})
	}
	return out
}

func queryCheck(promql, maxValue string) *v1alpha1.FleetAnalysis {
	return &v1alpha1.FleetAnalysis{Checks: []v1alpha1.FleetCheck{{Name: "error-rate", Query: &v1alpha1.FleetMetricQuery{PromQL: promql, Max: &maxValue}}}}
}

func TestAQueryFailsTheMembersItsSamplesName(t *testing.T) {
	t.Parallel()
	prom := newPrometheusServer(t, func(string) (int, string) {
		return http.StatusOK, vector(map[string]string{"hcp-a": "0.01", "hcp-b": "0.30", "other-fleet": "9"})
	})
	e := &Evaluator{Prometheus: prom.client(t, "operator-token")}
	now := time.Now()

	v := e.Evaluate(t.Context(), queryCheck(`sum by (namespace) (rate(errors[5m]))`, "0.05"), subjects("hcp-a", "hcp-b"), "canary", "rev-2", now.Add(-time.Minute), now)

	assert.True(t, v.Conclusive)
	assert.Equal(t, map[string]string{"hcp-b": "analysis check error-rate: value 0.3 outside [-Inf, 0.05]"}, v.Failed, "a namespace outside the partition is ignored")
	require.Len(t, v.Results, 1)
	res := v.Results[0]
	assert.Equal(t, v1alpha1.FleetCheckFailed, res.Result)
	assert.Equal(t, "0.3", res.Value, "the worst value of the partition")
	assert.Equal(t, "canary", res.Partition)
	assert.Equal(t, "rev-2", res.Revision)
	assert.Contains(t, res.Message, "1 member(s) failed: hcp-b")
	assert.Equal(t, []string{"sum by (namespace) (rate(errors[5m]))"}, prom.queries)
	assert.Equal(t, []string{"Bearer operator-token"}, prom.tokens, "the operator's credentials")
}

func TestAnAggregateSpeaksForEveryMember(t *testing.T) {
	t.Parallel()
	prom := newPrometheusServer(t, func(string) (int, string) { return http.StatusOK, vector(map[string]string{"": "7"}) })
	e := &Evaluator{Prometheus: prom.client(t, "")}
	v := e.Evaluate(t.Context(), queryCheck("sum(errors)", "5"), subjects("hcp-a", "hcp-b"), "canary", "rev", time.Now(), time.Now())
	assert.Len(t, v.Failed, 2)
	assert.Empty(t, prom.tokens[0], "no token configured, none sent")

	passing := &Evaluator{Prometheus: newPrometheusServer(t, func(string) (int, string) { return http.StatusOK, vector(map[string]string{"": "1"}) }).client(t, "")}
	v = passing.Evaluate(t.Context(), queryCheck("sum(errors)", "5"), subjects("hcp-a"), "canary", "rev", time.Now(), time.Now())
	assert.Empty(t, v.Failed)
	assert.True(t, v.Conclusive)
	assert.Equal(t, v1alpha1.FleetCheckPassed, v.Results[0].Result)
}

func TestAnInconclusiveQueryFollowsThePolicy(t *testing.T) {
	t.Parallel()
	for name, answer := range map[string]func(string) (int, string){
		"no sample": func(string) (int, string) { return http.StatusOK, vector(nil) },
		"server error": func(string) (int, string) {
			return http.StatusBadRequest, `{"status":"error","errorType":"bad_data","error":"parse error"}`
		},
		"response too large": func(string) (int, string) {
			return http.StatusOK, strings.Repeat(" ", maxResponseBytes+1) + vector(nil)
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := &Evaluator{Prometheus: newPrometheusServer(t, answer).client(t, "")}
			check := queryCheck("errors", "1")
			v := e.Evaluate(t.Context(), check, subjects("hcp-a"), "canary", "rev", time.Now(), time.Now())
			assert.False(t, v.Conclusive, "Wait, the default")
			assert.Empty(t, v.Failed)
			assert.Equal(t, v1alpha1.FleetCheckInconclusive, v.Results[0].Result)
			assert.Contains(t, v.Results[0].Message, "onInconclusive: Wait")

			check.OnInconclusive = v1alpha1.FleetInconclusiveFail
			v = e.Evaluate(t.Context(), check, subjects("hcp-a"), "canary", "rev", time.Now(), time.Now())
			assert.True(t, v.Conclusive)
			assert.Contains(t, v.Failed, "hcp-a")

			check.OnInconclusive = v1alpha1.FleetInconclusivePass
			v = e.Evaluate(t.Context(), check, subjects("hcp-a"), "canary", "rev", time.Now(), time.Now())
			assert.True(t, v.Conclusive)
			assert.Empty(t, v.Failed)
		})
	}
	v := (&Evaluator{}).Evaluate(t.Context(), queryCheck("errors", "1"), subjects("hcp-a"), "canary", "rev", time.Now(), time.Now())
	assert.False(t, v.Conclusive)
	assert.Contains(t, v.Results[0].Message, "no --analysis-prometheus-address")
}

func TestACELCheckSeesTheMemberAndItsCluster(t *testing.T) {
	t.Parallel()
	e := &Evaluator{}
	cel := func(expr string) *v1alpha1.FleetAnalysis {
		return &v1alpha1.FleetAnalysis{Checks: []v1alpha1.FleetCheck{{Name: "ready", CEL: expr}}}
	}
	ss := subjects("hcp-a", "hcp-b")
	ss[1].Cluster.Labels["region"] = "us"

	v := e.Evaluate(t.Context(), cel(`member.status.conditions.exists(c, c.type == "Ready" && c.status == "True") && cluster.labels.region == "eu"`), ss, "canary", "rev", time.Now(), time.Now())
	assert.True(t, v.Conclusive)
	assert.Equal(t, map[string]string{"hcp-b": "analysis check ready: false"}, v.Failed)
	assert.Equal(t, "1", v.Results[0].Value)

	v = e.Evaluate(t.Context(), cel(`member.metadata.labels.tier == "gold" && member.metadata.namespace.startsWith("hcp-")`), ss, "canary", "rev", time.Now(), time.Now())
	assert.Empty(t, v.Failed)

	// An expression that would run long is stopped by its cost limit: inconclusive.
	v = e.Evaluate(t.Context(), cel(`[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10].all(c, [1,2,3,4,5,6,7,8,9,10].all(d, [1,2,3,4,5,6,7,8,9,10].all(e, a+b+c+d+e > 0)))))`), ss, "canary", "rev", time.Now(), time.Now())
	assert.False(t, v.Conclusive)
	assert.Contains(t, v.Results[0].Message, "cost limit")

	v = e.Evaluate(t.Context(), cel(`member.metadata.name`), ss, "canary", "rev", time.Now(), time.Now())
	assert.False(t, v.Conclusive)
	assert.Contains(t, v.Results[0].Message, "not a bool")
}

func TestTheWorstValueIsTheNearestToItsBound(t *testing.T) {
	t.Parallel()
	prom := newPrometheusServer(t, func(string) (int, string) {
		return http.StatusOK, vector(map[string]string{"hcp-a": "0.01", "hcp-b": "0.04", "hcp-c": "0.02"})
	})
	e := &Evaluator{Prometheus: prom.client(t, "")}
	v := e.Evaluate(t.Context(), queryCheck("errors", "0.05"), subjects("hcp-a", "hcp-b", "hcp-c"), "p", "rev", time.Now(), time.Now())
	assert.Equal(t, v1alpha1.FleetCheckPassed, v.Results[0].Result)
	assert.Equal(t, "0.04", v.Results[0].Value)
}

func TestAMemberWithoutASampleIsNotKnownToPass(t *testing.T) {
	t.Parallel()
	prom := newPrometheusServer(t, func(string) (int, string) { return http.StatusOK, vector(map[string]string{"hcp-a": "0.01"}) })
	e := &Evaluator{Prometheus: prom.client(t, "")}
	v := e.Evaluate(t.Context(), queryCheck("errors", "0.05"), subjects("hcp-a", "hcp-b"), "p", "rev", time.Now(), time.Now())
	assert.False(t, v.Conclusive, "hcp-b's exporter may be what the revision broke")
	assert.Contains(t, v.Results[0].Message, "no sample for hcp-b")
}

func TestMinOverMaxIsInconclusiveNotAFailureOfEveryMember(t *testing.T) {
	t.Parallel()
	prom := newPrometheusServer(t, func(string) (int, string) { return http.StatusOK, vector(map[string]string{"hcp-a": "0.01"}) })
	check := queryCheck("errors", "0.05")
	minValue := "1"
	check.Checks[0].Query.Min = &minValue
	v := (&Evaluator{Prometheus: prom.client(t, "")}).Evaluate(t.Context(), check, subjects("hcp-a"), "p", "rev", time.Now(), time.Now())
	assert.Empty(t, v.Failed)
	assert.Contains(t, v.Results[0].Message, "min 1 is over max 0.05")
}

func TestTheTokenIsNotSentWhereARedirectPoints(t *testing.T) {
	t.Parallel()
	elsewhere := newPrometheusServer(t, func(string) (int, string) { return http.StatusOK, vector(map[string]string{"hcp-a": "0.01"}) })
	redirecting := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirecting.Close)
	prom, err := NewPrometheus(redirecting.URL, func() (string, error) { return "operator-token", nil }, elsewhere.Client().Transport)
	require.NoError(t, err)
	v := (&Evaluator{Prometheus: prom}).Evaluate(t.Context(), queryCheck("errors", "1"), subjects("hcp-a"), "p", "rev", time.Now(), time.Now())
	assert.False(t, v.Conclusive)
	assert.Empty(t, elsewhere.tokens, "the redirect is not followed")
}

func TestALongErrorIsCutInStatus(t *testing.T) {
	t.Parallel()
	prom := newPrometheusServer(t, func(string) (int, string) {
		return http.StatusBadRequest, `{"status":"error","errorType":"bad_data","error":"` + strings.Repeat("x", 100000) + `"}`
	})
	v := (&Evaluator{Prometheus: prom.client(t, "")}).Evaluate(t.Context(), queryCheck("errors", "1"), subjects("hcp-a"), "p", "rev", time.Now(), time.Now())
	assert.LessOrEqual(t, len(v.Results[0].Message), maxMessage+len("…"))
}
