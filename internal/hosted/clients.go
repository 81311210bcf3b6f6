package hosted

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/apply"
)

const (
	// DefaultSecretName is the HyperShift connector Secret meant for components on the
	// management cluster.
	DefaultSecretName = "service-network-admin-kubeconfig"
	// DefaultSecretKey is the data key holding the kubeconfig.
	DefaultSecretKey = "kubeconfig"
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
	// IdleTTL evicts clients unused for this long.
	IdleTTL time.Duration
	// Scheme for the clients; nil means client-go's.
	Scheme *runtime.Scheme
	// Kubeconfig loosens what a connector kubeconfig may hold; the zero value allows inline
	// credentials over verified TLS only.
	Kubeconfig KubeconfigPolicy
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
	builds  int
}

type entry struct {
	dataHash [sha256.Size]byte
	target   apply.Target
	lastUsed time.Time
	// downUntil holds requests back after the hosted API server failed to answer, so that
	// one unreachable hosted cluster costs one timeout per cool-down, not one per reconcile.
	downUntil time.Time
	downErr   error
}

// NoCredentialsError says a namespace has no usable connector Secret.
type NoCredentialsError struct {
	Namespace, Secret, Reason string
}

func (e *NoCredentialsError) Error() string {
	return fmt.Sprintf("no hosted-cluster credentials in namespace %s: %s (hosted-cluster phases need the HyperShift connector Secret %s/%s with a %q key; is this a hosted-control-plane namespace?)",
		e.Namespace, e.Reason, e.Namespace, e.Secret, DefaultSecretKey)
}

// NewClients returns a cache that reads connector Secrets through reader, typically the
// manager's cache restricted to Secrets of that one name.
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
	return &Clients{reader: reader, opts: opts, now: time.Now, entries: map[string]*entry{}}
}

// SecretName is the connector Secret's name, for watches and cache filters.
func (c *Clients) SecretName() string { return c.opts.SecretName }

// Target returns the apply target for the hosted cluster of a hosted-control-plane namespace.
func (c *Clients) Target(ctx context.Context, namespace string) (apply.Target, error) {
	var secret corev1.Secret
	err := c.reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: c.opts.SecretName}, &secret)
	if apierrors.IsNotFound(err) {
		return apply.Target{}, &NoCredentialsError{Namespace: namespace, Secret: c.opts.SecretName, Reason: "Secret not found"}
	}
	if err != nil {
		return apply.Target{}, fmt.Errorf("read Secret %s/%s: %w", namespace, c.opts.SecretName, err)
	}
	data := secret.Data[c.opts.SecretKey]
	if len(data) == 0 {
		return apply.Target{}, &NoCredentialsError{Namespace: namespace, Secret: c.opts.SecretName, Reason: fmt.Sprintf("key %q is missing or empty", c.opts.SecretKey)}
	}
	hash := sha256.Sum256(data)

	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	c.evictIdle(now)
	if e, ok := c.entries[namespace]; ok && e.dataHash == hash {
		e.lastUsed = now
		if now.Before(e.downUntil) {
			return apply.Target{}, &apply.TargetUnavailableError{Class: "hosted-cluster", Target: e.target.Name,
				Err: fmt.Errorf("%w; next attempt after %s", e.downErr, e.downUntil.Format(time.RFC3339))}
		}
		return e.target, nil
	}
	target, err := c.build(namespace, data)
	if err != nil {
		return apply.Target{}, err
	}
	c.entries[namespace] = &entry{dataHash: hash, target: target, lastUsed: now}
	c.builds++
	return target, nil
}

// MarkUnavailable records that the hosted API server of a namespace did not answer: Target
// fails fast for one request timeout, then tries again. New credentials clear the mark.
func (c *Clients) MarkUnavailable(namespace string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[namespace]; ok {
		e.downUntil = c.now().Add(c.opts.Timeout)
		e.downErr = err
	}
}

// Forget drops the client of a namespace, when no resource there needs it any more.
func (c *Clients) Forget(namespace string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, namespace)
}

// Stats reports how many clients are cached and how many were built in all.
func (c *Clients) Stats() (cached, builds int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries), c.builds
}

func (c *Clients) evictIdle(now time.Time) {
	for ns, e := range c.entries {
		if now.Sub(e.lastUsed) > c.opts.IdleTTL {
			delete(c.entries, ns)
		}
	}
}

func (c *Clients) build(namespace string, kubeconfig []byte) (apply.Target, error) {
	cfg, err := restConfigFromKubeconfig(kubeconfig, c.opts.Kubeconfig)
	var refused *InsecureKubeconfigError
	if errors.As(err, &refused) {
		refused.Namespace, refused.Secret = namespace, c.opts.SecretName
		return apply.Target{}, refused
	}
	if err != nil {
		return apply.Target{}, &NoCredentialsError{Namespace: namespace, Secret: c.opts.SecretName, Reason: err.Error()}
	}
	if !c.opts.KeepServiceHost {
		cfg.Host, err = rewriteServiceHost(cfg.Host, namespace)
		if err != nil {
			return apply.Target{}, &NoCredentialsError{Namespace: namespace, Secret: c.opts.SecretName, Reason: err.Error()}
		}
	}
	if cfg.ServerName == "" && cfg.Host != "" {
		// Keep verifying the serving certificate against the name HyperShift issued it for.
		if u, err := url.Parse(cfg.Host); err == nil && u.Hostname() == serviceHost+"."+namespace+".svc" {
			cfg.ServerName = u.Hostname()
		}
	}
	cfg.Timeout = c.opts.Timeout
	cfg.QPS, cfg.Burst = 50, 100
	cfg.UserAgent = "pkgsync"
	cl, err := client.New(cfg, client.Options{Scheme: c.opts.Scheme})
	if err != nil {
		return apply.Target{}, fmt.Errorf("build client for hosted cluster of %s: %w", namespace, err)
	}
	return apply.Target{Client: cl, Name: "hosted cluster " + namespace}, nil
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
