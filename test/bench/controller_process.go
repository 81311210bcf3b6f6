package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/image"
)

// processController is `pkgsync controller` run as a process of its own, as a user runs it, so
// that its memory and CPU are its own and not the harness's. Its requests to the management API
// server pass through a counting proxy on loopback (the proxy holds the credentials); its
// reconciles, probes and Go heap are read from its /metrics, its live heap from its pprof
// endpoint, its RSS and CPU from /proc.
type processController struct {
	cmd        *exec.Cmd
	metricsURL string
	api        *apiProxy
	http       *http.Client
	// informers is the harness's own cache, watching Packages for the trackers.
	informers crcache.Cache
	// started is when the process was started (after its build).
	started time.Time
}

// startProcessController builds cmd/pkgsync (once), starts `pkgsync controller` and waits until
// its metrics endpoint answers. The returned channel closes when the process has ended. A shard
// of 0 or more runs it with --watch-label-selector for that shard's Packages (shard.go); only the
// process of shard 0 or below keeps the harness's informer.
func startProcessController(ctx context.Context, env *environment, o options, shard int) (*processController, <-chan error, error) {
	bin := filepath.Join(env.dir, "pkgsync")
	if _, err := os.Stat(bin); err != nil {
		// Built as the release image builds it: a cgo build links Go's plugin package (which
		// kustomize's plugin loader imports) dynamically and exports every symbol, some 18 MB of
		// symbol tables that a static binary does not map, and that the peak RSS would count.
		progress("building cmd/pkgsync for the controller process, as the release image does")
		build := image.GoBuild{Package: "./cmd/pkgsync", OS: runtime.GOOS, Arch: runtime.GOARCH, Output: bin}
		if err := image.BuildBinary(ctx, build); err != nil {
			return nil, nil, fmt.Errorf("build cmd/pkgsync (run from the repository root): %w", err)
		}
	}
	c := &processController{http: &http.Client{Timeout: time.Minute}}
	var err error
	if c.api, err = startAPIProxy(env.mgmt.Config); err != nil {
		return nil, nil, err
	}
	kubeconfig := filepath.Join(env.dir, fmt.Sprintf("controller-%d.kubeconfig", max(shard, 0)))
	if err := writeKubeconfig(kubeconfig, "http://"+c.api.addr); err != nil {
		return nil, nil, err
	}
	metricsAddr, err := freeAddress()
	if err != nil {
		return nil, nil, err
	}
	c.metricsURL = "http://" + metricsAddr
	// The fleet's images are on the counting proxy, on loopback: the controller reaches such a
	// registry only when named. The bench's hosted API servers listen on 127.0.0.1 and its
	// HostedClusters (optional) advertise no endpoint: connector kubeconfigs may name any server.
	c.cmd = exec.Command(bin, "controller", "--kubeconfig", kubeconfig, "--plain-http-registry", env.proxy.Host,
		"--metrics-bind-address", metricsAddr, "--health-probe-bind-address", "0", "--enable-pprof",
		"--concurrency", strconv.Itoa(o.workers), "--insecure-kubeconfig-any-server")
	if shard >= 0 {
		c.cmd.Args = append(c.cmd.Args, "--watch-label-selector", fmt.Sprintf("%s=%d", shardLabel, shard))
	}
	c.cmd.Args = append(c.cmd.Args, strings.Fields(o.controllerArgs)...)
	if o.notifyAddr != "" {
		c.cmd.Args = append(c.cmd.Args, "--webhook-bind-address", o.notifyAddr, "--webhook-secret", notifySecret)
	}
	if o.logFile != "" {
		name := o.logFile
		if shard > 0 {
			name = fmt.Sprintf("%s.%d", o.logFile, shard)
		}
		f, err := os.Create(name)
		if err != nil {
			return nil, nil, fmt.Errorf("create controller log: %w", err)
		}
		c.cmd.Stderr = f
	}
	memLimit := o.goMemLimit
	if memLimit == "" {
		if memLimit, err = deploymentEnv(o.managerManifest, "GOMEMLIMIT"); err != nil {
			return nil, nil, err
		}
	}
	c.cmd.Env = os.Environ()
	if memLimit != "" && memLimit != "off" {
		c.cmd.Env = append(c.cmd.Env, "GOMEMLIMIT="+memLimit)
		if shard <= 0 {
			progress("the controller runs with GOMEMLIMIT=%s", memLimit)
		}
	}
	c.started = time.Now()
	if err := c.cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("start pkgsync controller: %w", err)
	}
	stopped := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		err := c.cmd.Wait()
		close(exited)
		<-ctx.Done()
		stopped <- err
	}()
	go func() {
		select {
		case <-ctx.Done():
			_ = c.cmd.Process.Signal(syscall.SIGTERM)
		case <-exited:
		}
	}()

	if shard <= 0 {
		// The harness's cache logs nothing worth reading (controller-runtime prints a stack
		// trace when no logger was set).
		ctrl.SetLogger(logr.Discard())
		c.informers, err = crcache.New(env.mgmt.Config, crcache.Options{
			Scheme: env.scheme, ByObject: map[client.Object]crcache.ByObject{&v1alpha1.Package{}: {}},
		})
		if err != nil {
			return c, stopped, fmt.Errorf("harness cache: %w", err)
		}
		go func() { _ = c.informers.Start(ctx) }()
	}

	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := c.gather(ctx); err == nil {
			return c, stopped, nil
		} else if time.Now().After(deadline) {
			return c, stopped, fmt.Errorf("pkgsync controller's metrics did not answer within a minute: %w", err)
		}
		select {
		case <-exited:
			return c, stopped, errors.New("pkgsync controller exited at start (pass -log-file to see why)")
		case <-ctx.Done():
			return c, stopped, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (c *processController) packageInformer(ctx context.Context) (crcache.Informer, error) {
	inf, err := c.informers.GetInformer(ctx, &v1alpha1.Package{})
	if err != nil {
		return nil, err
	}
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !c.informers.WaitForCacheSync(syncCtx) {
		return nil, errors.New("harness cache did not sync within a minute")
	}
	return inf, nil
}

func (c *processController) get(ctx context.Context, path string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.metricsURL+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return resp.Body, nil
}

func (c *processController) gather(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	body, err := c.get(ctx, "/metrics")
	if err != nil {
		return nil, fmt.Errorf("read controller metrics: %w", err)
	}
	defer body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(body)
	if err != nil {
		return nil, fmt.Errorf("parse controller metrics: %w", err)
	}
	return fams, nil
}

func (c *processController) mgmtRequests() counts { return c.api.snapshot() }

func (c *processController) usage(ctx context.Context) usage {
	pid := strconv.Itoa(c.cmd.Process.Pid)
	u := usage{
		cpuSeconds: processCPUSeconds(pid), peakRSS: procStatus(pid, "VmHWM"), fileRSS: procStatus(pid, "RssFile"),
		harnessCPU: cpuSeconds(), harnessPeakRSS: procStatus("self", "VmHWM"), harnessSeparated: true,
	}
	if fams, err := c.gather(ctx); err == nil {
		u.heap = uint64(metricValue(fams, "go_memstats_heap_alloc_bytes"))
		u.goroutines = int(metricValue(fams, "go_goroutines"))
	}
	return u
}

func (c *processController) resetPeakRSS() {
	resetPeakRSS(strconv.Itoa(c.cmd.Process.Pid))
	resetPeakRSS("self")
}

// liveHeap reads HeapAlloc from the text heap profile with gc=1: the profile handler collects
// garbage first, so this is what is live.
func (c *processController) liveHeap(ctx context.Context) (int64, error) {
	body, err := c.get(ctx, "/debug/pprof/heap?debug=1&gc=1")
	if err != nil {
		return 0, fmt.Errorf("read controller heap profile: %w", err)
	}
	defer body.Close()
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "# HeapAlloc = "); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, errors.Join(errors.New("no HeapAlloc in the controller's heap profile"), sc.Err())
}

func (c *processController) heapProfile(ctx context.Context, w io.Writer) error {
	body, err := c.get(ctx, "/debug/pprof/heap?gc=1")
	if err != nil {
		return fmt.Errorf("read controller heap profile: %w", err)
	}
	defer body.Close()
	_, err = io.Copy(w, body)
	return err
}

func (c *processController) cpuProfile(ctx context.Context, d time.Duration, w io.Writer) error {
	body, err := c.get(ctx, fmt.Sprintf("/debug/pprof/profile?seconds=%d", max(int(d.Seconds()), 1)))
	if err != nil {
		return fmt.Errorf("read controller CPU profile: %w", err)
	}
	defer body.Close()
	_, err = io.Copy(w, body)
	return err
}

// deploymentEnv returns the value of an environment variable of the controller container in the
// Deployment manifest at path ("" when it sets none), so that the benchmark runs the controller
// as the shipped Deployment does.
func deploymentEnv(path, name string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read the controller Deployment (run from the repository root): %w", err)
	}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var d appsv1.Deployment
		if err := yaml.Unmarshal([]byte(doc), &d); err != nil {
			return "", fmt.Errorf("parse %s: %w", path, err)
		}
		if d.Kind != "Deployment" {
			continue
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			for _, e := range c.Env {
				if e.Name == name {
					return e.Value, nil
				}
			}
		}
		return "", nil
	}
	return "", fmt.Errorf("%s holds no Deployment", path)
}

// hostedClientsBuilt cannot be seen from outside the process.
func (c *processController) hostedClientsBuilt() int { return -1 }

// processCPUSeconds is utime+stime of a process from /proc/PID/stat, in clock ticks of 1/100 s
// (USER_HZ is 100 on Linux).
func processCPUSeconds(pid string) float64 {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	// The command name may hold spaces: the fields start after its closing parenthesis.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100
}

func freeAddress() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// writeKubeconfig writes a kubeconfig of server without credentials: the proxy adds them.
func writeKubeconfig(path, server string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["management"] = &clientcmdapi.Cluster{Server: server}
	cfg.AuthInfos["controller"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["management"] = &clientcmdapi.Context{Cluster: "management", AuthInfo: "controller"}
	cfg.CurrentContext = "management"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write controller kubeconfig: %w", err)
	}
	return nil
}

// apiProxy is a plain-HTTP reverse proxy on loopback in front of the management API server that
// counts the requests passing through it, by verb and resource, as apiCounter does in process.
type apiProxy struct {
	addr    string
	server  *http.Server
	counter apiCounter
}

func startAPIProxy(cfg *rest.Config) (*apiProxy, error) {
	target, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, fmt.Errorf("management API server %q: %w", cfg.Host, err)
	}
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("management API transport: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the management API proxy: %w", err)
	}
	p := &apiProxy{addr: ln.Addr().String()}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport:     p.counter.wrap(transport),
		FlushInterval: -1, // watches stream
	}
	p.server = &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.server.Serve(ln) }()
	return p, nil
}

func (p *apiProxy) snapshot() counts { return p.counter.snapshot() }

func (p *apiProxy) Close() error { return p.server.Close() }
