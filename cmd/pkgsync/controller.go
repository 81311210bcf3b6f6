package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	runtimectrl "github.com/fluxcd/pkg/runtime/controller"
	"github.com/fluxcd/pkg/runtime/jitter"
	"github.com/fluxcd/pkg/runtime/metrics"
	"github.com/fluxcd/pkg/runtime/pprof"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/internal/cloudauth"
	"pkgsync.dev/pkgsync/internal/controller"
	"pkgsync.dev/pkgsync/internal/fleet/analysis"
	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/internal/notify"
	"pkgsync.dev/pkgsync/internal/receiver"
	"pkgsync.dev/pkgsync/internal/reconciler"
	"pkgsync.dev/pkgsync/internal/version"
	"pkgsync.dev/pkgsync/internal/wakes"
	"pkgsync.dev/pkgsync/source"
)

type controllerOptions struct {
	kube                  *kubeFlags
	metricsAddr           string
	probeAddr             string
	pprof                 bool
	leaderElect           bool
	leaderElectionID      string
	namespace             string
	concurrency           int
	applyConcurrency      int
	maxConcurrentApplies  int
	kubeAPIQPS            float32
	kubeAPIBurst          int
	plainHTTPRegistries   []string
	localRegistries       []string
	caFile                string
	watchLabelSelector    string
	cacheDir              string
	pullMemoryMiB         int64
	allowCrossNamespace   bool
	verifyInterval        time.Duration
	requireSignatures     bool
	defaultServiceAccount string
	noObjectIdentity      bool
	hostedNamespaceRule   string
	kubeconfigPolicy      hosted.KubeconfigPolicy
	disableHosted         bool
	connectorSecret       string
	connectorSecretKey    string
	keepServiceHost       bool
	hostedTimeout         time.Duration
	hostedDialTimeout     time.Duration
	hostedIdleConnTimeout time.Duration
	hostedProbeInterval   time.Duration
	hostedProbeMax        time.Duration
	hostedBudget          time.Duration
	hostedTeardownTimeout time.Duration
	progressInterval      time.Duration
	retryInterval         time.Duration
	development           bool
	overrides             overrideOptions
	jitter                jitter.IntervalOptions
	webhookAddr           string
	webhookSecret         string
	notificationSecret    string
	prometheusAddress     string
	prometheusTokenFile   string
	prometheusCAFile      string
	webhookRegistries     []string
	webhookCertDir        string
}

func newControllerCmd() *cobra.Command {
	o := &controllerOptions{}
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Run the controller that reconciles Packages, ClusterPackages, ObjectDeployments, ClusterObjectDeployments and HostedClusterPackages",
		Long: `Run the controller. It reconciles Package, ClusterPackage, ObjectDeployment,
ClusterObjectDeployment and HostedClusterPackage resources of the management cluster (TrustPolicies
are read, not reconciled), and sends hosted-cluster phases to the hosted cluster of the resource's
hosted-control-plane namespace through HyperShift's connector Secret.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runController(cmd, o) },
	}
	fs := cmd.Flags()
	o.kube = newKubeFlags(fs, "Kubeconfig of the management cluster (default: $KUBECONFIG, in-cluster, or ~/.kube/config)")
	o.kube.inClusterFirst = true
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "Address of the Prometheus metrics endpoint; 0 disables it")
	fs.BoolVar(&o.pprof, "enable-pprof", false, "Serve Go's pprof profiles under /debug/pprof/ on the metrics endpoint (heap, CPU, goroutines: for diagnosing memory and CPU use)")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints; 0 disables them")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "Elect a leader, for running more than one replica")
	fs.StringVar(&o.leaderElectionID, "leader-election-id", "pkgsync-controller", "Name of the leader-election Lease; unless given, a digest of --watch-label-selector is appended when that is set, so that shards never wait for each other")
	fs.StringVar(&o.namespace, "namespace", os.Getenv("POD_NAMESPACE"), "The controller's namespace: leader election, and ClusterPackage pull secrets")
	fs.IntVar(&o.concurrency, "concurrency", 4, "Resources of each kind reconciled at once")
	fs.IntVar(&o.applyConcurrency, "apply-concurrency-per-package", apply.DefaultConcurrency, "Objects one reconcile applies at once within a phase (CRDs, then Namespaces, then the rest, each run finished before the next)")
	fs.IntVar(&o.maxConcurrentApplies, "max-concurrent-applies", 32, "Objects applied at once by every reconcile together, across clusters; 0 for no bound")
	fs.Float32Var(&o.kubeAPIQPS, "kube-api-qps", 1000, "Requests per second the controller sends to the management API server at most (client-side; a package of thousands of objects is bounded by it)")
	fs.IntVar(&o.kubeAPIBurst, "kube-api-burst", 2000, "Requests the controller may send to the management API server in a burst above --kube-api-qps")
	fs.StringSliceVar(&o.plainHTTPRegistries, "plain-http-registry", nil, "Registry host[:port] reached over plain HTTP (repeatable); it may be on a loopback or link-local address. Every other registry is reached over HTTPS")
	fs.StringSliceVar(&o.localRegistries, "local-registry", nil, "Registry host[:port] reached over HTTPS that may be on a loopback, link-local, unspecified or cloud metadata address, or on this machine's own (repeatable); others on such addresses are refused, however they are named or redirected to")
	fs.StringVar(&o.caFile, "ca-file", "", "PEM bundle of extra CAs trusted for registries")
	o.overrides.ApplyFlags(fs)
	fs.StringVar(&o.watchLabelSelector, "watch-label-selector", "", "Reconcile only resources matching this label selector (sharding)")
	fs.StringVar(&o.cacheDir, "cache-dir", "", "Directory keeping verified blobs across restarts (optional)")
	fs.Int64Var(&o.pullMemoryMiB, "pull-memory-mib", 128, "MiB that pulls in flight may hold unpacked, together; a pull waits (within the reconcile's timeout) for what others hold. At least 128, the largest package")
	fs.BoolVar(&o.allowCrossNamespace, "allow-cross-namespace", false, "Let namespaced resources create cluster-scoped objects and objects in other namespaces")
	fs.BoolVar(&o.requireSignatures, "require-signatures", false, "Refuse Packages and ClusterPackages without spec.verify, and HostedClusterPackages without spec.template.spec.verify (reason VerificationRequired)")
	fs.DurationVar(&o.verifyInterval, "verify-interval", 10*time.Minute, "How long a signature verdict (a digest verified with a key set, or a trusted root and identities) is remembered; after it the signatures are read again, so a deleted signature counts within it")
	fs.StringVar(&o.defaultServiceAccount, "default-service-account", "", "ServiceAccount (of the resource's own namespace) impersonated by namespaced resources that name none, and by every ObjectDeployment; empty means the controller's own identity")
	fs.BoolVar(&o.noObjectIdentity, "no-object-level-workload-identity", false, "Refuse a cloud spec.provider (aws, azure, gcp) for resources that run as a ServiceAccount (spec.serviceAccountName, or --default-service-account): only the controller's own cloud identity is exchanged, and the controller needs no create on serviceaccounts/token")
	fs.StringVar(&o.hostedNamespaceRule, "hosted-namespace-rule", string(reconciler.HostedNamespaceByHostedCluster),
		"Which namespaces may have hosted-cluster phases: HostedCluster (a HyperShift HostedCluster maps to the namespace) or Label (the namespace is labelled hypershift.openshift.io/hosted-control-plane=true; only where tenants cannot label namespaces)")
	fs.BoolVar(&o.kubeconfigPolicy.AllowExec, "insecure-kubeconfig-exec", false, "Allow exec credential plugins in connector kubeconfigs (they run commands inside the controller)")
	fs.BoolVar(&o.kubeconfigPolicy.AllowInsecureTLS, "insecure-kubeconfig-tls", false, "Allow connector kubeconfigs to disable TLS verification or use plain http")
	fs.BoolVar(&o.kubeconfigPolicy.AllowAnyServer, "insecure-kubeconfig-any-server", false, "Allow connector kubeconfigs to name any server, not only the hosted API server (kube-apiserver[.<namespace>.svc[.cluster.local]] or the HostedCluster's status.controlPlaneEndpoint)")
	fs.BoolVar(&o.disableHosted, "disable-hosted-clusters", false, "Refuse hosted-cluster phases (and do not watch connector Secrets)")
	fs.StringVar(&o.connectorSecret, "hosted-kubeconfig-secret", hosted.DefaultSecretName, "Name of the connector Secret in each hosted-control-plane namespace")
	fs.StringVar(&o.connectorSecretKey, "hosted-kubeconfig-key", hosted.DefaultSecretKey, "Data key of the kubeconfig in the connector Secret")
	fs.BoolVar(&o.keepServiceHost, "keep-kube-apiserver-host", false, "Do not rewrite the server host kube-apiserver to kube-apiserver.<namespace>.svc")
	fs.DurationVar(&o.hostedTimeout, "hosted-request-timeout", 15*time.Second, "Timeout of each request to a hosted API server")
	fs.DurationVar(&o.hostedDialTimeout, "hosted-dial-timeout", 5*time.Second, "Timeout of connecting to a hosted API server, and of the TLS handshake; a connection silent this long is pinged, and closed when the ping goes unanswered as long")
	fs.DurationVar(&o.hostedIdleConnTimeout, "hosted-idle-connection-timeout", hosted.DefaultIdleConnTimeout, "Close a connection to a hosted API server after this long without a request (kept across the passes of a wait, not across intervals)")
	fs.DurationVar(&o.hostedProbeInterval, "hosted-probe-interval", 2*time.Second, "First wait before an unreachable hosted API server is probed again; doubles per failed probe")
	fs.DurationVar(&o.hostedProbeMax, "hosted-probe-max-interval", 5*time.Minute, "Longest wait between probes of an unreachable hosted API server")
	fs.DurationVar(&o.hostedBudget, "hosted-reconcile-budget", 30*time.Second, "Longest time one reconcile spends on one hosted cluster")
	fs.DurationVar(&o.hostedTeardownTimeout, "hosted-teardown-timeout", 2*time.Minute, "How long deletion waits for an unreachable hosted cluster before letting its objects go")
	fs.DurationVar(&o.progressInterval, "progress-interval", 5*time.Second, "How often a pass waiting for availability is repeated, after the first 10s of a phase's wait (checked every second)")
	fs.DurationVar(&o.retryInterval, "retry-interval", 30*time.Second, "How soon a failed reconciliation is retried (spec.retryInterval overrides)")
	fs.BoolVar(&o.development, "log-development", false, "Human-friendly logs instead of JSON")
	fs.StringVar(&o.webhookAddr, "webhook-bind-address", "0", "Address of the receiver of registry notifications (POST /hooks/distribution, /hooks/harbor, /hooks/generic); 0 disables it")
	fs.StringVar(&o.prometheusAddress, "analysis-prometheus-address", "", "URL of the Prometheus HTTP API (or Thanos Querier) that fleets' spec.rollout.analysis queries are sent to; empty: query checks are inconclusive")
	fs.StringVar(&o.prometheusTokenFile, "analysis-prometheus-token-file", "", "File holding the bearer token sent to --analysis-prometheus-address, read per query (a mounted ServiceAccount token rotates)")
	fs.StringVar(&o.prometheusCAFile, "analysis-prometheus-ca-file", "", "PEM bundle of the CAs trusted for --analysis-prometheus-address instead of the system's")
	fs.StringVar(&o.notificationSecret, "notification-secret", "pkgsync-notifications", "Secret of the controller's namespace whose data key notifications.yaml lists the webhooks told of rollouts that halt, roll back, await approval or complete (docs/operations.md); absent or empty: none")
	fs.StringVar(&o.webhookSecret, "webhook-secret", "pkgsync-webhook", "Secret of the controller's namespace (or NAMESPACE/NAME) holding the receiver's key per source: data keys distribution, harbor, generic; a source without one is refused")
	fs.StringArrayVar(&o.webhookRegistries, "webhook-registry", nil, "SOURCE=HOST[:PORT]: bind a source's key (distribution, harbor, generic) to a registry, as images name it (repeatable; several per source allowed): its notifications then wake followers in those registries only. A source without one wakes a repository path's followers in every registry")
	fs.StringVar(&o.webhookCertDir, "webhook-cert-dir", "", "Directory with tls.crt and tls.key (a mounted kubernetes.io/tls Secret) for the receiver to serve HTTPS, reloaded when they change; empty serves plain HTTP")
	// Flux's flag and semantics: spreads interval reconciles so a fleet created at once does not
	// reconcile in lockstep forever.
	o.jitter.BindFlagsWithDefault(fs, 10)
	return cmd
}

func runController(cmd *cobra.Command, o *controllerOptions) error {
	ctrl.SetLogger(zap.New(zap.UseDevMode(o.development), zap.WriteTo(cmd.ErrOrStderr())))
	log := ctrl.Log.WithName("setup")

	if err := o.jitter.SetGlobalJitter(nil); err != nil {
		return usageError("--interval-jitter-percentage: %w", err)
	}
	overrides, err := o.overrides.overrides()
	if err != nil {
		return err
	}
	rule := reconciler.HostedNamespaceRule(o.hostedNamespaceRule)
	if rule != reconciler.HostedNamespaceByHostedCluster && rule != reconciler.HostedNamespaceByLabel {
		return usageError("--hosted-namespace-rule: %q is not a rule, want %s or %s", o.hostedNamespaceRule, reconciler.HostedNamespaceByHostedCluster, reconciler.HostedNamespaceByLabel)
	}
	restConfig, err := o.kube.restConfig()
	if err != nil {
		return err
	}
	restConfig.UserAgent = "pkgsync-controller"
	restConfig.QPS, restConfig.Burst = o.kubeAPIQPS, o.kubeAPIBurst

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}

	var selector labels.Selector
	if o.watchLabelSelector != "" {
		sel, err := labels.Parse(o.watchLabelSelector)
		if err != nil {
			return usageError("--watch-label-selector: %w", err)
		}
		selector = sel
	}
	leaderElectionID := o.leaderElectionID
	if !cmd.Flags().Changed("leader-election-id") {
		// Shards with the default lease would wait for each other: each gets its own.
		leaderElectionID = controller.LeaderElectionID(o.leaderElectionID, selector)
	}
	metricsOpts := metricsserver.Options{BindAddress: o.metricsAddr}
	if o.pprof {
		// Off by default: profiles are for whoever diagnoses the controller, and the metrics
		// endpoint is often scraped more widely than that.
		metricsOpts.ExtraHandlers = pprof.GetHandlers()
	}
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                  scheme,
		Cache:                   controller.CacheOptions(o.connectorSecret, selector),
		Metrics:                 metricsOpts,
		HealthProbeBindAddress:  o.probeAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        leaderElectionID,
		LeaderElectionNamespace: o.namespace,
		// A new leader takes over at once after a clean shutdown (rolling update).
		LeaderElectionReleaseOnCancel: true,
		Client:                        controller.ClientOptions(),
		MapperProvider:                controller.NewRESTMapper,
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}

	// Registries are named by whoever writes a Package: none reaches this machine's own ports
	// (metrics, health, pprof) or a link-local address unless the operator named it.
	srcOpts := source.Options{
		PlainHTTPHosts: o.plainHTTPRegistries, LocalHosts: o.localRegistries, RefuseLocalAddresses: true,
		CacheDir: o.cacheDir, UserAgent: "pkgsync-controller/" + version.Version,
		PullBytes: o.pullMemoryMiB << 20, Overrides: overrides,
	}
	if o.caFile != "" {
		if srcOpts.CABundle, err = os.ReadFile(o.caFile); err != nil {
			return fmt.Errorf("read --ca-file: %w", err)
		}
	}
	src, err := source.NewClient(srcOpts)
	if err != nil {
		return err
	}
	cloud, err := newCloudExchanger(restConfig, scheme, srcOpts.CABundle, o.noObjectIdentity)
	if err != nil {
		return err
	}
	var hc *hosted.Clients
	if !o.disableHosted {
		hc = hosted.NewClients(mgr.GetClient(), hosted.Options{
			SecretName: o.connectorSecret, SecretKey: o.connectorSecretKey, KeepServiceHost: o.keepServiceHost,
			Timeout: o.hostedTimeout, Scheme: scheme, Kubeconfig: o.kubeconfigPolicy,
			DialTimeout: o.hostedDialTimeout, IdleConnTimeout: o.hostedIdleConnTimeout, ProbeInterval: o.hostedProbeInterval, MaxProbeInterval: o.hostedProbeMax,
			Budget: o.hostedBudget, RESTMapper: mgr.GetRESTMapper(), SecretDataReader: mgr.GetAPIReader(),
		})
	}
	kubeVersion := ""
	if dc, err := discovery.NewDiscoveryClientForConfig(restConfig); err == nil {
		if v, err := dc.ServerVersion(); err == nil {
			kubeVersion = v.GitVersion
		}
	}
	openShiftVersion, proxy, err := openShiftEnvironment(cmd.Context(), restConfig)
	if err != nil {
		return err
	}
	recorder := metrics.NewRecorder()
	crmetrics.Registry.MustRegister(recorder.Collectors()...)

	ctx := cmd.Context()
	prometheus, err := analysisPrometheus(o)
	if err != nil {
		return err
	}
	wakes, err := setupReceiver(mgr, o)
	if err != nil {
		return err
	}
	err = controller.Setup(ctx, mgr, controller.Config{
		Options: reconciler.Options{
			Namespace:             o.namespace,
			KubernetesVersion:     kubeVersion,
			OpenShiftVersion:      openShiftVersion,
			Proxy:                 proxy,
			ImageOverrides:        overrides,
			ProgressInterval:      o.progressInterval,
			RetryInterval:         o.retryInterval,
			AllowCrossNamespace:   o.allowCrossNamespace,
			RequireSignatures:     o.requireSignatures,
			VerifyInterval:        o.verifyInterval,
			HostedTeardownTimeout: o.hostedTeardownTimeout,
			HostedNamespaceRule:   rule,
			DefaultServiceAccount: o.defaultServiceAccount,
			Cloud:                 cloud,
			Wakes:                 wakes,
			ShardLabelKeys:        controller.ShardLabelKeys(selector),
			ApplyConcurrency:      o.applyConcurrency,
			MaxConcurrentApplies:  o.maxConcurrentApplies,
		},
		Source:                  src,
		Hosted:                  hc,
		Metrics:                 runtimectrl.NewMetrics(mgr, recorder, v1alpha1.FinalizerName),
		MaxConcurrentReconciles: o.concurrency,
		Notifier:                newNotifier(mgr, o),
		AnalysisPrometheus:      prometheus,
	})
	if err != nil {
		return err
	}
	log.Info("starting controller", "kubernetesVersion", kubeVersion, "hostedClusters", !o.disableHosted)
	return mgr.Start(ctx)
}

// analysisPrometheus is the client of --analysis-prometheus-address, nil when it is empty.
func analysisPrometheus(o *controllerOptions) (*analysis.Prometheus, error) {
	if o.prometheusAddress == "" {
		return nil, nil
	}
	if o.prometheusTokenFile != "" && !strings.HasPrefix(o.prometheusAddress, "https://") {
		return nil, usageError("--analysis-prometheus-address %s: a bearer token (--analysis-prometheus-token-file) is sent over https only", o.prometheusAddress)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	if o.prometheusCAFile != "" {
		pem, err := os.ReadFile(o.prometheusCAFile)
		if err != nil {
			return nil, fmt.Errorf("--analysis-prometheus-ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, usageError("--analysis-prometheus-ca-file: %s holds no PEM certificate", o.prometheusCAFile)
		}
		transport.TLSClientConfig.RootCAs = pool
	}
	var token func() (string, error)
	if f := o.prometheusTokenFile; f != "" {
		token = func() (string, error) {
			b, err := os.ReadFile(f)
			return strings.TrimSpace(string(b)), err
		}
	}
	return analysis.NewPrometheus(o.prometheusAddress, token, transport)
}

// newNotifier is the notifier of --notification-secret, nil when it is empty or the controller
// has no namespace to keep it in.
func newNotifier(mgr ctrl.Manager, o *controllerOptions) *notify.Notifier {
	if o.notificationSecret == "" || o.namespace == "" {
		return nil
	}
	return &notify.Notifier{Reader: mgr.GetAPIReader(), Secret: types.NamespacedName{Namespace: o.namespace, Name: o.notificationSecret},
		Log: ctrl.Log.WithName("notify")}
}

// newCloudExchanger returns what exchanges workload identity for registry credentials
// (spec.provider): with object-level identity, ServiceAccounts are read and their tokens
// requested straight from the API server (not the manager's cache, which would keep every
// ServiceAccount of the cluster for the few that are named).
func newCloudExchanger(restConfig *rest.Config, scheme *runtime.Scheme, caBundle []byte, noObjectIdentity bool) (*cloudauth.Exchanger, error) {
	opts := cloudauth.Options{CABundle: caBundle}
	if !noObjectIdentity {
		c, err := client.New(restConfig, client.Options{Scheme: scheme})
		if err != nil {
			return nil, fmt.Errorf("create the ServiceAccount client: %w", err)
		}
		opts.ServiceAccounts = cloudauth.APIServiceAccounts(c)
	}
	return cloudauth.New(opts)
}

// setupReceiver adds the receiver of registry notifications to the manager when
// --webhook-bind-address is set, and returns what it wakes (nil when it is not).
func setupReceiver(mgr ctrl.Manager, o *controllerOptions) (*wakes.RegistryWakes, error) {
	if o.webhookAddr == "" || o.webhookAddr == "0" {
		return nil, nil
	}
	secret := types.NamespacedName{Namespace: o.namespace, Name: o.webhookSecret}
	if ns, name, ok := strings.Cut(o.webhookSecret, "/"); ok {
		secret = types.NamespacedName{Namespace: ns, Name: name}
	}
	if secret.Namespace == "" || secret.Name == "" {
		return nil, usageError("--webhook-secret: %q names no Secret: give NAME (of --namespace) or NAMESPACE/NAME", o.webhookSecret)
	}
	registries, err := webhookRegistries(o.webhookRegistries)
	if err != nil {
		return nil, err
	}
	m, err := receiver.NewMetrics(crmetrics.Registry)
	if err != nil {
		return nil, fmt.Errorf("register webhook metrics: %w", err)
	}
	wakes := wakes.NewRegistryWakes()
	srv := &receiver.Server{Addr: o.webhookAddr, CertDir: o.webhookCertDir, Handler: receiver.New(receiver.Options{
		Keys:       &receiver.SecretKeys{Reader: mgr.GetAPIReader(), Secret: secret},
		Waker:      wakes,
		Metrics:    m,
		Registries: registries,
	})}
	if err := mgr.Add(srv); err != nil {
		return nil, fmt.Errorf("add webhook receiver: %w", err)
	}
	return wakes, nil
}

// webhookRegistries reads --webhook-registry SOURCE=HOST[:PORT] flags: the registries each
// source's key is bound to.
func webhookRegistries(flags []string) (map[receiver.Source][]string, error) {
	if len(flags) == 0 {
		return nil, nil
	}
	out := map[receiver.Source][]string{}
	for _, f := range flags {
		name, host, ok := strings.Cut(f, "=")
		source := receiver.Source(name)
		if !ok || host == "" || strings.ContainsAny(host, "/ ") || !slices.Contains(receiver.Sources, source) {
			return nil, usageError("--webhook-registry: %q is not SOURCE=HOST[:PORT] with SOURCE one of %v", f, receiver.Sources)
		}
		out[source] = append(out[source], host)
	}
	return out, nil
}
