package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/test/testenv"
)

// controllerProc is a `pkgsync controller` process, run as a user runs it.
type controllerProc struct {
	cmd *exec.Cmd
	// metricsURL is the process's /metrics endpoint.
	metricsURL string
	logPath    string
	exited     chan struct{}
}

// managementKubeconfig writes a kubeconfig of the management cluster for controller processes.
func managementKubeconfig(t *testing.T) string {
	t.Helper()
	kc, err := testenv.KubeconfigFor("management", suite.mgmt.Config)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(path, kc, 0o600))
	return path
}

// runController starts `pkgsync controller` for the resources labelled shardLabel=shard, with a
// metrics endpoint of its own, fast progress and retry intervals, the suite's registry (on
// loopback, plain HTTP) allowed, and args appended (later flags win). The process is killed
// with SIGKILL when the test ends; its log is printed when the test failed.
func runController(t *testing.T, shard string, args ...string) *controllerProc {
	t.Helper()
	return runControllerWithout(t, shard, append([]string{"--plain-http-registry", suite.registry.Host}, args...)...)
}

// runControllerWithout is runController without the suite's registry allowed: the controller
// refuses it, as it refuses every loopback registry the operator did not name.
func runControllerWithout(t *testing.T, shard string, args ...string) *controllerProc {
	t.Helper()
	return runControllerWithEnv(t, shard, nil, args...)
}

// runControllerWithEnv is runControllerWithout with env (KEY=VALUE) added to the process's
// environment, as a Deployment's env would.
func runControllerWithEnv(t *testing.T, shard string, env []string, args ...string) *controllerProc {
	t.Helper()
	bin := crashBinary(t)
	metricsAddr := refusedAddress(t)
	p := &controllerProc{metricsURL: "http://" + metricsAddr + "/metrics", logPath: filepath.Join(t.TempDir(), "controller.log"), exited: make(chan struct{})}
	log, err := os.Create(p.logPath)
	require.NoError(t, err)
	full := append([]string{"controller", "--kubeconfig", managementKubeconfig(t),
		"--watch-label-selector", shardLabel + "=" + shard,
		"--metrics-bind-address", metricsAddr, "--health-probe-bind-address", "0",
		"--progress-interval", "200ms", "--retry-interval", "500ms",
		"--hosted-probe-interval", "250ms", "--hosted-probe-max-interval", "2s"}, args...)
	p.cmd = exec.Command(bin, full...)
	if env != nil {
		p.cmd.Env = append(os.Environ(), env...)
	}
	p.cmd.Stdout, p.cmd.Stderr = log, log
	require.NoError(t, p.cmd.Start())
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		p.kill()
		_ = log.Close()
		if t.Failed() {
			if out, err := os.ReadFile(p.logPath); err == nil {
				t.Logf("controller %v log (last 8 KiB):\n%s", full[1:], tail(out, 8<<10))
			}
		}
	})
	return p
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// kill ends the process with SIGKILL, as a crashed node would, and waits for it.
func (p *controllerProc) kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// metricSeries is one sample of a scraped metric: its labels and value (a counter's or
// gauge's value, a histogram's sample count).
type metricSeries struct {
	labels map[string]string
	value  float64
}

// scrape reads the process's /metrics and returns each family's series.
func (p *controllerProc) scrape(ctx context.Context) (map[string][]metricSeries, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.metricsURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", p.metricsURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("scrape %s: %s: %s", p.metricsURL, resp.Status, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", p.metricsURL, err)
	}
	out := map[string][]metricSeries{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			s := metricSeries{labels: map[string]string{}}
			for _, l := range m.GetLabel() {
				s.labels[l.GetName()] = l.GetValue()
			}
			s.value = valueOf(f.GetType(), m)
			out[name] = append(out[name], s)
		}
	}
	return out, nil
}

func valueOf(typ dto.MetricType, m *dto.Metric) float64 {
	switch typ {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue()
	case dto.MetricType_HISTOGRAM:
		return float64(m.GetHistogram().GetSampleCount())
	case dto.MetricType_SUMMARY:
		return float64(m.GetSummary().GetSampleCount())
	default:
		return m.GetUntyped().GetValue()
	}
}

// sum adds the values of the series of name whose labels include want; found reports whether
// any series matched.
func sum(metrics map[string][]metricSeries, name string, want map[string]string) (total float64, found bool) {
	for _, s := range metrics[name] {
		match := true
		for k, v := range want {
			if s.labels[k] != v {
				match = false
				break
			}
		}
		if match {
			total += s.value
			found = true
		}
	}
	return total, found
}

// metricValue scrapes p within an EventuallyWithT condition and returns the sum of the series
// of name matching want; it fails ct (not the test) when the scrape fails or nothing matches.
func metricValue(ctx context.Context, ct *assert.CollectT, p *controllerProc, name string, want map[string]string) (float64, bool) {
	m, err := p.scrape(ctx)
	if !assert.NoError(ct, err) {
		return 0, false
	}
	v, found := sum(m, name, want)
	return v, assert.True(ct, found, "no series %s%v", name, want)
}

// currentMetric waits until the series of name matching want exist and returns their sum.
func currentMetric(t *testing.T, p *controllerProc, name string, want map[string]string) float64 {
	t.Helper()
	var v float64
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		v, _ = metricValue(t.Context(), ct, p, name, want)
	}, timeout, interval)
	return v
}

// waitForMetric waits until the series of name matching want sum to a value cond accepts.
func waitForMetric(t *testing.T, p *controllerProc, name string, want map[string]string, what string, cond func(float64) bool) float64 {
	t.Helper()
	var v float64
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		var ok bool
		if v, ok = metricValue(t.Context(), ct, p, name, want); ok {
			assert.True(ct, cond(v), "%s%v = %v, want %s", name, want, v, what)
		}
	}, timeout, interval)
	return v
}

// cleanupObject deletes obj from the management cluster when the test ends and waits until it
// is gone (deleteAndWait). Register it after starting the controller that finalizes obj, so
// that cleanups (last in, first out) run while that controller still does.
func cleanupObject(t *testing.T, obj client.Object) {
	t.Helper()
	t.Cleanup(func() { deleteAndWait(t, obj) })
}
