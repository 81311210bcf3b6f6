package hosted

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/apply"
)

const (
	// DefaultSecretName is the HyperShift connector Secret meant for components on the
	// management cluster.
	DefaultSecretName = "service-network-admin-kubeconfig"
	// DefaultSecretKey is the data key holding the kubeconfig.
	DefaultSecretKey = "kubeconfig"
	// DefaultIdleConnTimeout is Options.IdleConnTimeout's default: three times the progress
	// interval of a waiting pass (5 s), far below any reconcile interval worth having.
	DefaultIdleConnTimeout = 15 * time.Second
	// serviceHost is the bare Service name HyperShift writes as the server host; it only
	// resolves inside the hosted-control-plane namespace.
	serviceHost = "kube-apiserver"
)

// Options configure how hosted-cluster clients are built.
type Options struct {
	// SecretName and SecretKey locate the kubeconfig in each hosted-control-plane namespace.
	SecretName, SecretKey string
	// KeepServiceHost disables rewriting the server host kube-apiserver to
	// kube-apiserver.<namespace>.svc.
	KeepServiceHost bool
	// Timeout bounds every request to a hosted API server, so that one unreachable hosted
	// cluster holds a worker for at most this long.
	Timeout time.Duration
	// DialTimeout bounds connecting to a hosted API server (TCP) and the TLS handshake, each,
	// separately from Timeout, so that a dead address is noticed in seconds.
	DialTimeout time.Duration
	// ProbeInterval is the first wait before an unreachable hosted API server is probed again;
	// each failed probe doubles it, up to MaxProbeInterval.
	ProbeInterval, MaxProbeInterval time.Duration
	// ProbeTimeout bounds one probe.
	ProbeTimeout time.Duration
	// FirstContactWait bounds how long Target waits for the first contact with a hosted API
	// server whose client it just built; a server that has not answered by then is reported
	// unavailable, and its namespace woken when it answers.
	FirstContactWait time.Duration
	// Budget bounds the time one apply pass spends on one hosted cluster (apply.Target.Budget),
	// so that a cluster that answers slowly costs only its own resources.
	Budget time.Duration
	// OnRequest, when set, is called after every request to a hosted API server with the time
	// it took (for metrics).
	OnRequest func(took time.Duration)
	// OnProbe, when set, is called after every probe (for metrics).
	OnProbe func(namespace string, took time.Duration, err error)
	// IdleTTL evicts clients unused for this long.
	IdleTTL time.Duration
	// IdleConnTimeout closes a connection to a hosted API server that carried no request for
	// this long. Its HTTP/2 state (buffers, header tables, the transport's goroutines) is most
	// of what a hosted cluster costs in memory between passes, so it is kept only across the
	// passes of one wait (seconds apart), not across intervals (minutes apart): a pass after
	// an interval pays one TLS handshake instead.
	IdleConnTimeout time.Duration
	// Scheme for the clients; nil means client-go's.
	Scheme *runtime.Scheme
	// RESTMapper, when set, maps the kinds of Kubernetes' built-in API groups for every hosted
	// client (the management cluster's mapper, typically): their resource names and scopes are
	// the same on every cluster. Other groups are discovered per hosted cluster, one group
	// version at a time. Nil means each hosted cluster discovers the built-in groups too.
	RESTMapper meta.RESTMapper
	// Kubeconfig loosens what a connector kubeconfig may hold; the zero value allows inline
	// credentials over verified TLS only.
	Kubeconfig KubeconfigPolicy
	// SecretDataReader reads a connector Secret whole, when its metadata (read through the
	// reader NewClients is given) shows a Secret the namespace's client was not built from:
	// the manager's uncached APIReader, so that no cache holds a kubeconfig for every hosted
	// cluster (some 4 KiB each, copied from the API server's watch, while the client built
	// from it holds what it needs). Nil means the reader NewClients is given.
	SecretDataReader client.Reader
}

// Clients caches one client per hosted-control-plane namespace. A client is built lazily on
// first use, rebuilt when the connector Secret's data changes (HyperShift rotates the client
// certificate), and evicted when unused. One controller serves every hosted cluster this way.
type Clients struct {
	reader client.Reader
	opts   Options
	now    func() time.Time

	mu      sync.Mutex
	entries map[string]*entry
	// departed holds, for a while, the client of a namespace whose connector Secret was deleted
	// while its circuit was closed (Departed).
	departed  map[string]departedEntry
	sweptAt   time.Time // when evictIdle last walked entries and departed
	builds    int
	recovered []func(namespace string)
	// probes counts the probes sent.
	probes atomic.Int64
}

type entry struct {
	dataHash [sha256.Size]byte
	// secretVersion is the resourceVersion of the connector Secret the client was last found
	// to match: while the Secret's metadata shows it, its data is not read again.
	secretVersion string
	// server is the kubeconfig's server as written (before the Service host is rewritten), and
	// serverField names it; checked on every use, as the endpoint a HostedCluster advertises
	// may change.
	server, serverField string
	// secretCreated is when the connector Secret last read was created (the API server's
	// clock), for Departed.
	secretCreated time.Time
	target        apply.Target
	lastUsed      time.Time
	health        health
	// probeURL and probeClient check the API server while the circuit is open; the client is
	// built when the first such probe is due (most hosted clusters never need one).
	probeURL    string
	probeClient func() (*http.Client, error)
	// contactClient sends the first contact over the reconciles' own transport, so that the
	// pass waiting for it uses the connection it opened: one TLS handshake per new client
	// instead of two (a handshake is a tenth of a converging controller's CPU, and as much
	// again of the hosted API server's). Dropped once the first contact has ended.
	contactClient *http.Client
	// contacted is closed when the first contact with the API server has ended; awaited says a
	// caller stopped waiting for it and must be woken when it succeeds.
	contacted chan struct{}
	awaited   bool
	// inUse counts the passes between Target and Release; closeIdle closes the transport's
	// idle connections (nil for the transport of an exec plugin, which client-go keeps).
	inUse     int
	closeIdle func()
}

// NoCredentialsError says a namespace has no usable connector Secret.
type NoCredentialsError struct {
	Namespace, Secret, Reason string
}

func (e *NoCredentialsError) Error() string {
	return fmt.Sprintf("no hosted-cluster credentials in namespace %s: %s (hosted-cluster phases need the HyperShift connector Secret %s/%s with a %q key; is this a hosted-control-plane namespace?)",
		e.Namespace, e.Reason, e.Namespace, e.Secret, DefaultSecretKey)
}

// NewClients returns a cache that reads the metadata of connector Secrets through reader,
// typically the manager's cache restricted to Secrets of that one name (a metadata-only
// informer), and their data through Options.SecretDataReader.
func NewClients(reader client.Reader, opts Options) *Clients {
	if opts.SecretName == "" {
		opts.SecretName = DefaultSecretName
	}
	if opts.SecretKey == "" {
		opts.SecretKey = DefaultSecretKey
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 15 * time.Second
	}
	if opts.IdleTTL <= 0 {
		opts.IdleTTL = 30 * time.Minute
	}
	if opts.IdleConnTimeout <= 0 {
		opts.IdleConnTimeout = DefaultIdleConnTimeout
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = 5 * time.Second
	}
	if opts.ProbeInterval <= 0 {
		opts.ProbeInterval = 2 * time.Second
	}
	if opts.MaxProbeInterval < opts.ProbeInterval {
		opts.MaxProbeInterval = max(5*time.Minute, opts.ProbeInterval)
	}
	if opts.ProbeTimeout <= 0 {
		opts.ProbeTimeout = 3 * time.Second
	}
	if opts.FirstContactWait <= 0 {
		opts.FirstContactWait = time.Second
	}
	if opts.Budget <= 0 {
		opts.Budget = 2 * opts.Timeout
	}
	if opts.SecretDataReader == nil {
		opts.SecretDataReader = reader
	}
	return &Clients{reader: reader, opts: opts, now: time.Now, entries: map[string]*entry{}, departed: map[string]departedEntry{}}
}

// SecretName is the connector Secret's name, for watches and cache filters.
func (c *Clients) SecretName() string { return c.opts.SecretName }

// Target returns the apply target for the hosted cluster of a hosted-control-plane namespace; hc
// is the HostedCluster behind it (nil when there is none), whose advertised endpoint the
// kubeconfig's server may name (checkServer).
func (c *Clients) Target(ctx context.Context, namespace string, hc *HostedCluster) (apply.Target, error) {
	secret, err := c.readSecretMetadata(ctx, namespace)
	if err != nil {
		return apply.Target{}, err
	}
	c.mu.Lock()
	e, ok := c.entries[namespace]
	var hash [sha256.Size]byte
	known := ok && secret.ResourceVersion != "" && e.secretVersion == secret.ResourceVersion
	if known {
		hash = e.dataHash
	}
	c.mu.Unlock()
	var data []byte
	if !known {
		if data, secret, err = c.readSecretData(ctx, namespace); err != nil {
			return apply.Target{}, err
		}
		hash = sha256.Sum256(data)
	}

	c.mu.Lock()
	// The Secret is there: what it holds, not a departed client, is the namespace's credentials.
	delete(c.departed, namespace)
	now := c.now()
	c.evictIdle(now)
	e, ok = c.entries[namespace]
	if ok && e.dataHash == hash {
		if refused := c.checkServer(namespace, e.server, e.serverField, hc); refused != nil {
			// The HostedCluster advertises another endpoint now: nothing more is sent, probes
			// included.
			delete(c.entries, namespace)
			c.mu.Unlock()
			return apply.Target{}, refused
		}
	}
	if !ok || e.dataHash != hash {
		if data == nil { // the entry read was replaced meanwhile: read the data the new one lacks
			c.mu.Unlock()
			return c.Target(ctx, namespace, hc)
		}
		if e, err = c.build(namespace, data, hc); err != nil {
			c.mu.Unlock()
			return apply.Target{}, err
		}
		// A new client is not used before the API server has answered once: the first contact
		// is a probe, sent off the worker, which waits for it FirstContactWait at most. A dead
		// cluster so costs a worker that wait once, instead of the dial and handshake timeouts.
		e.dataHash = hash
		e.health = health{state: HealthProbing, openedAt: now, nextProbe: now.Add(c.opts.ProbeTimeout)}
		e.contacted = make(chan struct{})
		c.entries[namespace] = e
		c.builds++
		go c.firstContact(namespace, e)
	}
	e.lastUsed = now
	e.secretVersion = secret.ResourceVersion
	e.secretCreated = secret.CreationTimestamp.Time
	contacted := e.contacted
	c.mu.Unlock()
	c.awaitContact(ctx, contacted)

	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case e.health.state == HealthClosed:
		e.inUse++
		return e.target, nil
	case e.health.openErr == nil:
		// The first contact is still in flight: its answer wakes the namespace.
		e.awaited = true
		return apply.Target{}, c.uncontacted(namespace, e)
	default:
		// Nothing is sent: the prober alone talks to a hosted API server that did not answer.
		return apply.Target{}, unavailable(namespace, e)
	}
}

// readSecretMetadata reads the metadata of a namespace's connector Secret; a
// Secret that is not found departs the namespace's client (and its circuit: nothing is
// probed for a deleted connector Secret).
func (c *Clients) readSecretMetadata(ctx context.Context, namespace string) (*metav1.PartialObjectMetadata, error) {
	secret := &metav1.PartialObjectMetadata{}
	secret.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	err := c.reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: c.opts.SecretName}, secret)
	if apierrors.IsNotFound(err) {
		c.depart(namespace)
		return nil, &NoCredentialsError{Namespace: namespace, Secret: c.opts.SecretName, Reason: "Secret not found"}
	}
	if err != nil {
		return nil, fmt.Errorf("read Secret %s/%s: %w", namespace, c.opts.SecretName, err)
	}
	return secret, nil
}

// readSecretData reads a namespace's connector Secret whole (Options.SecretDataReader) and
// returns its kubeconfig, and its metadata as read.
func (c *Clients) readSecretData(ctx context.Context, namespace string) ([]byte, *metav1.PartialObjectMetadata, error) {
	var secret corev1.Secret
	err := c.opts.SecretDataReader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: c.opts.SecretName}, &secret)
	if apierrors.IsNotFound(err) {
		c.depart(namespace)
		return nil, nil, &NoCredentialsError{Namespace: namespace, Secret: c.opts.SecretName, Reason: "Secret not found"}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read Secret %s/%s: %w", namespace, c.opts.SecretName, err)
	}
	data := secret.Data[c.opts.SecretKey]
	if len(data) == 0 {
		c.mu.Lock()
		delete(c.departed, namespace) // the Secret says there are no credentials now
		c.mu.Unlock()
		return nil, nil, &NoCredentialsError{Namespace: namespace, Secret: c.opts.SecretName, Reason: fmt.Sprintf("key %q is missing or empty", c.opts.SecretKey)}
	}
	return data, &metav1.PartialObjectMetadata{ObjectMeta: secret.ObjectMeta}, nil
}

// awaitContact waits for contacted to close, FirstContactWait at most.
func (c *Clients) awaitContact(ctx context.Context, contacted <-chan struct{}) {
	select {
	case <-contacted:
		return
	default:
	}
	wait := time.NewTimer(c.opts.FirstContactWait)
	defer wait.Stop()
	select {
	case <-contacted:
	case <-wait.C:
	case <-ctx.Done():
	}
}

// Release ends a pass that Target returned held to, which expects the next pass on the
// namespace's hosted cluster in nextPass. When no other pass is using the client and the next
// one is further away than IdleConnTimeout, the client's idle connections close now instead of
// after that timeout: an HTTP/2 connection and its TLS state are most of what a hosted cluster
// costs in memory, and they would idle until the timeout for nothing, as the next pass dials
// again either way. A pass that is waiting for availability (seconds) keeps them. A client
// replaced since (a rotated Secret, an eviction) is not the namespace's any more: its release
// changes nothing, and its connections close after the idle timeout.
func (c *Clients) Release(namespace string, held apply.Target, nextPass time.Duration) {
	c.mu.Lock()
	e, ok := c.entries[namespace]
	if !ok || e.inUse == 0 || e.target.Client != held.Client {
		c.mu.Unlock()
		return
	}
	e.inUse--
	closeIdle := e.inUse == 0 && nextPass > c.opts.IdleConnTimeout && e.closeIdle != nil
	c.mu.Unlock()
	if closeIdle {
		e.closeIdle()
	}
}

// Probes is the number of probes sent so far.
func (c *Clients) Probes() int64 { return c.probes.Load() }

// MarkUnavailable records that the hosted API server of a namespace did not answer: its
// circuit opens, Target fails fast without touching the network, and the prober checks the
// server once per backoff step. New credentials close the circuit. It returns the error Target
// returns from now on (wrapping an *UnavailableError), so that the failure that opened the
// circuit reads the same as every retry after it; nil when the namespace has no client.
func (c *Clients) MarkUnavailable(namespace string, err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	// A departed client that did not answer is not tried again by the namespace's other
	// resources: each would wait for it as long.
	delete(c.departed, namespace)
	e, ok := c.entries[namespace]
	if !ok {
		return nil
	}
	if e.health.state == HealthClosed {
		c.open(e, err)
	}
	return unavailable(namespace, e)
}

// Forget drops the client of a namespace and its circuit, when no resource there needs it any
// more: an open circuit is no longer probed.
func (c *Clients) Forget(namespace string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, namespace)
	delete(c.departed, namespace)
}

// Stats reports how many clients are cached and how many were built in all.
func (c *Clients) Stats() (cached, builds int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries), c.builds
}

// evictIdle drops the clients unused for IdleTTL and the departed ones older than DepartedTTL.
// It walks them at most once per quarter of the shorter TTL: walking every client on every
// Target, under the lock every pass takes, cost a fleet of N hosted clusters N² steps a wave
// (2 % of the controller's CPU in an update wave of 1000). Both TTLs bound memory, not access:
// Departed checks its own, and a client used before it is evicted is as good as a new one.
func (c *Clients) evictIdle(now time.Time) {
	if now.Sub(c.sweptAt) < min(c.opts.IdleTTL, DepartedTTL)/4 {
		return
	}
	c.sweptAt = now
	for ns, e := range c.entries {
		if now.Sub(e.lastUsed) > c.opts.IdleTTL {
			delete(c.entries, ns)
		}
	}
	for ns, d := range c.departed {
		if now.Sub(d.at) > DepartedTTL {
			delete(c.departed, ns)
		}
	}
}

// checkServer is checkServer of the kubeconfig for namespace, nil when the server is accepted.
func (c *Clients) checkServer(namespace, server, field string, hc *HostedCluster) error {
	refused := checkServer(server, field, namespace, hc, c.opts.Kubeconfig)
	if refused == nil {
		return nil
	}
	refused.Namespace, refused.Secret = namespace, c.opts.SecretName
	return refused
}

func (c *Clients) build(namespace string, kubeconfig []byte, hc *HostedCluster) (*entry, error) {
	cfg, serverField, err := restConfigFromKubeconfig(kubeconfig, c.opts.Kubeconfig)
	var refused *InsecureKubeconfigError
	if errors.As(err, &refused) {
		refused.Namespace, refused.Secret = namespace, c.opts.SecretName
		return nil, refused
	}
	if err != nil {
		return nil, &NoCredentialsError{Namespace: namespace, Secret: c.opts.SecretName, Reason: err.Error()}
	}
	server := cfg.Host
	if err := c.checkServer(namespace, server, serverField, hc); err != nil {
		return nil, err
	}
	if !c.opts.KeepServiceHost {
		cfg.Host, err = rewriteServiceHost(cfg.Host, namespace)
		if err != nil {
			return nil, &NoCredentialsError{Namespace: namespace, Secret: c.opts.SecretName, Reason: err.Error()}
		}
	}
	if cfg.ServerName == "" && cfg.Host != "" {
		// Keep verifying the serving certificate against the name HyperShift issued it for.
		if u, err := url.Parse(cfg.Host); err == nil && u.Hostname() == serviceHost+"."+namespace+".svc" {
			cfg.ServerName = u.Hostname()
		}
	}
	// Every request, discovery for the RESTMapper included, is bounded by Timeout; connecting
	// and the TLS handshake each by the shorter DialTimeout.
	cfg.Timeout = c.opts.Timeout
	// One token bucket for the hosted cluster: controller-runtime builds a REST client per kind,
	// and each would otherwise get a bucket of its own, so the bound would grow with the kinds.
	cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(50, 100)
	cfg.UserAgent = "pkgsync"
	// The probe has a transport of its own, without the request timing: a probe is not time spent
	// waiting on the hosted API server by a reconcile, and its connections never queue behind the
	// reconciles' ones.
	// The certificates are parsed once for both transports.
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, &NoCredentialsError{Namespace: namespace, Secret: c.opts.SecretName, Reason: "TLS settings: " + err.Error()}
	}
	keepParsedCertificateOnly(tlsConfig, cfg)
	pc := c.lazyProbeClient(cfg, tlsConfig)
	cfg = withShortHandshake(cfg, c.opts.DialTimeout, c.opts.IdleConnTimeout, tlsConfig)
	var closeIdle func()
	if t, ok := cfg.Transport.(*http.Transport); ok {
		configureHTTP2(t, c.opts.DialTimeout)
		closeIdle = t.CloseIdleConnections // HTTP/2's too: x/net/http2 is configured on it
	}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return opaqueBodies{rt} })
	// The first contact is a probe (not timed as a reconcile's request, bounded by ProbeTimeout)
	// over the same transport.
	contactCfg := rest.CopyConfig(cfg)
	contactCfg.Timeout = c.opts.ProbeTimeout
	contact, err := rest.HTTPClientFor(contactCfg)
	if err != nil {
		return nil, fmt.Errorf("build first-contact client for hosted cluster of %s: %w", namespace, err)
	}
	contact.CheckRedirect = noRedirects
	if c.opts.OnRequest != nil {
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return timedTransport{rt, c.opts.OnRequest} })
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("build HTTP client for hosted cluster of %s: %w", namespace, err)
	}
	httpClient.CheckRedirect = noRedirects
	mapper, err := newRESTMapper(c.opts.RESTMapper, cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("build RESTMapper for hosted cluster of %s: %w", namespace, err)
	}
	cl, err := client.New(cfg, client.Options{Scheme: c.opts.Scheme, HTTPClient: httpClient, Mapper: mapper})
	if err != nil {
		return nil, fmt.Errorf("build client for hosted cluster of %s: %w", namespace, err)
	}
	return &entry{
		server: server, serverField: serverField,
		target:   apply.Target{Client: cl, Name: "hosted cluster " + namespace, Budget: c.opts.Budget},
		probeURL: strings.TrimSuffix(cfg.Host, "/") + "/readyz", probeClient: pc, contactClient: contact,
		closeIdle: closeIdle,
	}, nil
}

// lazyProbeClient returns a function that builds the probe client of cfg and tlsConfig on its
// first call, from what they are now (tlsConfig is cloned before the reconciles' transport
// adds HTTP/2 to it), and returns that client from then on.
func (c *Clients) lazyProbeClient(cfg *rest.Config, tlsConfig *tls.Config) func() (*http.Client, error) {
	base := rest.CopyConfig(cfg)
	if base.ExecProvider == nil && base.AuthProvider == nil {
		base.TLSClientConfig = rest.TLSClientConfig{} // tlsConfig holds it, parsed
	}
	var nextProtos []string
	if tlsConfig != nil {
		nextProtos = slices.Clone(tlsConfig.NextProtos)
	}
	return sync.OnceValues(func() (*http.Client, error) {
		var probeTLS *tls.Config
		if tlsConfig != nil {
			probeTLS = tlsConfig.Clone()
			probeTLS.NextProtos = nextProtos // without the h2 configureHTTP2 added
		}
		return c.probeClient(base, probeTLS)
	})
}

// probeClient is the HTTP client of a hosted cluster's probes while its circuit is open, cfg's
// own transport but for the timeout. Such probes are rare: an idle connection kept per hosted
// cluster would cost memory for nothing, and so would an HTTP/2 transport beside the
// reconciles' one: a probe is one request over HTTP/1.1. (The first contact goes over the
// reconciles' transport: the pass that waits for it uses its connection.)
func (c *Clients) probeClient(cfg *rest.Config, tlsConfig *tls.Config) (*http.Client, error) {
	probeCfg := withShortHandshake(cfg, c.opts.DialTimeout, c.opts.IdleConnTimeout, tlsConfig)
	probeCfg.Timeout = c.opts.ProbeTimeout
	if t, ok := probeCfg.Transport.(*http.Transport); ok {
		t.DisableKeepAlives = true
	}
	pc, err := rest.HTTPClientFor(probeCfg)
	if err != nil {
		return nil, err
	}
	pc.CheckRedirect = noRedirects
	return pc, nil
}

// keepParsedCertificateOnly replaces the client-certificate callback of client-go's TLS
// configuration with one that returns the certificate it parsed. client-go's callback keeps the
// whole transport configuration reachable, so the kubeconfig's PEM data (CA, certificate, key:
// some 4 KB a hosted cluster) stayed in memory beside the parsed certificate it always returns
// for static data. The certificate is kept without its parsed leaf (Leaf, some 2 KB): a TLS
// client sends the DER chain and signs with the private key, and never reads it. Credentials
// from an exec plugin or auth provider keep client-go's callback: theirs may change.
func keepParsedCertificateOnly(tlsConfig *tls.Config, cfg *rest.Config) {
	if tlsConfig == nil || tlsConfig.GetClientCertificate == nil || cfg.ExecProvider != nil || cfg.AuthProvider != nil ||
		len(cfg.CertData) == 0 || len(cfg.KeyData) == 0 || cfg.CertFile != "" || cfg.KeyFile != "" {
		return
	}
	parsed, err := tlsConfig.GetClientCertificate(nil)
	if err != nil || parsed == nil {
		return
	}
	cert := &tls.Certificate{Certificate: parsed.Certificate, PrivateKey: parsed.PrivateKey,
		SupportedSignatureAlgorithms: parsed.SupportedSignatureAlgorithms, OCSPStaple: parsed.OCSPStaple,
		SignedCertificateTimestamps: parsed.SignedCertificateTimestamps}
	tlsConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
}

// rewriteServiceHost turns https://kube-apiserver:6443 into
// https://kube-apiserver.<namespace>.svc:6443: the bare Service name resolves only from pods in
// the hosted-control-plane namespace, the qualified one from everywhere in the cluster.
func rewriteServiceHost(host, namespace string) (string, error) {
	u, err := url.Parse(host)
	if err != nil {
		return "", fmt.Errorf("server %q is not a URL: %w", host, err)
	}
	if u.Hostname() != serviceHost {
		return host, nil
	}
	name := serviceHost + "." + namespace + ".svc"
	if port := u.Port(); port != "" {
		u.Host = net.JoinHostPort(name, port)
	} else {
		u.Host = name
	}
	return u.String(), nil
}

// IsNoCredentials reports whether err says a namespace has no usable connector Secret.
func IsNoCredentials(err error) bool {
	var nc *NoCredentialsError
	return errors.As(err, &nc)
}
