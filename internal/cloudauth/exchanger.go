package cloudauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	fluxauth "github.com/fluxcd/pkg/auth"
	"golang.org/x/sync/singleflight"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/lru"
	"oras.land/oras-go/v2/registry/remote/auth"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/source"
)

// Options configure an Exchanger.
type Options struct {
	// ServiceAccounts reads ServiceAccounts and requests their tokens, for object-level identity
	// (a resource's spec.serviceAccountName). Nil refuses object-level identity: only the
	// process's own (the controller's pod, the CLI's machine) is exchanged.
	ServiceAccounts ServiceAccounts
	// CABundle is trusted for the token endpoints besides the system roots.
	CABundle []byte
	// Timeout bounds one exchange (DefaultTimeout when zero); MaxResponseBytes each answer of
	// it (DefaultMaxResponseBytes when zero).
	Timeout          time.Duration
	MaxResponseBytes int64
	// Now is the clock (time.Now when nil), for tests of renewal.
	Now func() time.Time
	// CLI says the process is the command line, not the controller: its own identity is the
	// machine's ambient credentials (environment, the clouds' configuration files, their CLIs,
	// which fluxcd/pkg/auth may then run), and errors say so.
	CLI bool
}

// Identity is whose workload identity is exchanged: a ServiceAccount, or, when ServiceAccount is
// empty, the process's own.
type Identity struct {
	Namespace, ServiceAccount string
}

func (e *Exchanger) describe(id Identity) string {
	switch {
	case id.ServiceAccount != "":
		return "ServiceAccount " + id.Namespace + "/" + id.ServiceAccount
	case e.opts.CLI:
		return "this machine's credentials"
	}
	return "the controller's own identity"
}

// ErrObjectLevelForbidden is returned for a ServiceAccount's identity when the Exchanger has no
// ServiceAccounts (the controller's --no-object-level-workload-identity).
var ErrObjectLevelForbidden = errors.New("object-level workload identity is forbidden on this controller (--no-object-level-workload-identity): a resource cannot exchange a ServiceAccount's identity for registry credentials")

// Exchanger gets registry credentials from workload identity and keeps them until shortly before
// they expire. Safe for concurrent use; share one per process.
type Exchanger struct {
	opts      Options
	providers map[v1alpha1.RegistryProvider]*provider

	mu    sync.Mutex
	cache *lru.Cache // of *entry, keyed by cacheKey
	// flight merges concurrent exchanges of one key: a fleet's first reconcile asks the same
	// registry for many members at once.
	flight singleflight.Group
}

// cacheEntries bounds the credentials kept: one per provider, identity and registry host.
const cacheEntries = 4096

// maxKeep bounds how long a credential is served from the cache, whatever its expiry (an ECR
// token lives 12 hours): a ServiceAccount whose role annotation changed, or that was deleted,
// is exchanged afresh within it.
const maxKeep = time.Hour

// renewBefore is how long before its expiry a credential is renewed, at most: a quarter of its
// lifetime when that is shorter, so that a short-lived one is still served for most of it.
const renewBefore = 5 * time.Minute

type entry struct {
	cred    auth.Credential
	renewAt time.Time
}

// New returns an Exchanger.
func New(opts Options) (*Exchanger, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxResponseBytes <= 0 {
		opts.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	tr, err := transportOptions(opts.CABundle, opts.Timeout, opts.MaxResponseBytes)
	if err != nil {
		return nil, err
	}
	return &Exchanger{opts: opts, providers: providers(tr, opts.Timeout), cache: lru.New(cacheEntries)}, nil
}

// Credentials returns the credentials of provider for id: the cloud's registry credentials for
// the provider's registry hosts, none (anonymous) for every other host, so that a cloud token is
// never sent elsewhere (a mirror, an override's target). It fails at once for a provider this
// package does not know and, without ServiceAccounts, for a ServiceAccount's identity.
func (e *Exchanger) Credentials(name v1alpha1.RegistryProvider, id Identity) (source.Credentials, error) {
	if e == nil {
		return nil, fmt.Errorf("spec.provider %s: this process exchanges no cloud identity", name)
	}
	p, ok := e.providers[name]
	if !ok {
		return nil, fmt.Errorf("spec.provider %q: not a cloud provider (aws, azure, gcp)", name)
	}
	if id.ServiceAccount != "" && e.opts.ServiceAccounts == nil {
		return nil, ErrObjectLevelForbidden
	}
	if id.ServiceAccount == "" {
		// The process's own identity is the same for every namespace: one credential for all.
		id.Namespace = ""
	}
	return func(ctx context.Context, host string) (auth.Credential, error) {
		if _, err := p.p.ParseArtifactRepository(host); err != nil {
			return auth.EmptyCredential, nil
		}
		return e.get(ctx, p, id, host)
	}, nil
}

// CheckRegistry fails when host is not a registry of provider name, whose credentials would
// never be used for it.
func (e *Exchanger) CheckRegistry(name v1alpha1.RegistryProvider, host string) error {
	p, ok := e.providers[name]
	if !ok {
		return fmt.Errorf("spec.provider %q: not a cloud provider (aws, azure, gcp)", name)
	}
	if _, err := p.p.ParseArtifactRepository(host); err != nil {
		return fmt.Errorf("%s is not %s (%s)", host, p.registries, p.registryForm)
	}
	return nil
}

// cacheKey identifies who obtained a credential for which registry: a credential is served
// only to a caller that names the same provider, ServiceAccount (namespace and name) and
// registry host, who could obtain it itself.
func cacheKey(p *provider, id Identity, host string) string {
	return string(p.name) + "\x00" + id.Namespace + "\x00" + id.ServiceAccount + "\x00" + host
}

func (e *Exchanger) get(ctx context.Context, p *provider, id Identity, host string) (auth.Credential, error) {
	key := cacheKey(p, id, host)
	now := e.opts.Now()
	e.mu.Lock()
	if v, ok := e.cache.Get(key); ok && now.Before(v.(*entry).renewAt) {
		e.mu.Unlock()
		return v.(*entry).cred, nil
	}
	e.mu.Unlock()
	ch := e.flight.DoChan(key, func() (any, error) {
		// The exchange outlives a caller that gives up (another may wait on it), bounded by the
		// exchange's own timeout.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.opts.Timeout)
		defer cancel()
		cred, expires, err := e.exchange(ctx, p, id, host)
		if err != nil {
			return nil, err
		}
		obtained := e.opts.Now()
		ent := &entry{cred: cred, renewAt: renewAt(obtained, expires)}
		e.mu.Lock()
		e.cache.Add(key, ent)
		e.mu.Unlock()
		return ent, nil
	})
	select {
	case <-ctx.Done():
		return auth.EmptyCredential, ctx.Err()
	case res := <-ch:
		if res.Err != nil {
			return auth.EmptyCredential, res.Err
		}
		return res.Val.(*entry).cred, nil
	}
}

// renewAt is when a credential obtained at obtained and expiring at expires is exchanged
// again: renewBefore (or a quarter of its lifetime) before it expires, and after maxKeep at
// the latest.
func renewAt(obtained, expires time.Time) time.Time {
	life := expires.Sub(obtained)
	margin := min(renewBefore, life/4)
	return minTime(expires.Add(-margin), obtained.Add(maxKeep))
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// exchange runs the chain: the identity's token, the cloud's credentials for it, the registry's
// credentials for those. Each failure names its step.
func (e *Exchanger) exchange(ctx context.Context, p *provider, id Identity, host string) (auth.Credential, time.Time, error) {
	fail := func(step Step, err error, hint string, secrets ...string) (auth.Credential, time.Time, error) {
		return auth.EmptyCredential, time.Time{}, &Error{Provider: string(p.name), Identity: e.describe(id), Registry: host, Step: step, Err: redact(err, secrets...), Hint: hint}
	}
	input, err := p.p.ParseArtifactRepository(host)
	if err != nil {
		return fail(StepRegistryToken, err, "")
	}
	opts, err := p.p.GetAccessTokenOptionsForArtifactRepository(host)
	if err != nil {
		return fail(StepRegistryToken, err, "")
	}
	var token fluxauth.Token
	var oidc string
	if id.ServiceAccount == "" {
		hint := p.controllerHint
		if e.opts.CLI {
			opts = append(opts, fluxauth.WithAllowShellOut())
			hint = p.ambientHint
		}
		token, err = p.p.NewControllerToken(ctx, opts...)
		if err != nil {
			return fail(StepControllerIdentity, err, hint)
		}
	} else {
		sa, err := e.opts.ServiceAccounts.Get(ctx, id.Namespace, id.ServiceAccount)
		if err != nil {
			hint := "check spec.serviceAccountName"
			if apierrors.IsNotFound(err) {
				hint = "create it, annotated " + p.annotationHint + ", or fix spec.serviceAccountName"
			}
			return fail(StepServiceAccount, err, hint)
		}
		if _, err := p.p.GetIdentity(*sa); err != nil {
			return fail(StepServiceAccount, err, "annotate it "+p.annotationHint)
		}
		audiences, err := p.p.GetAudiences(ctx, *sa)
		if err != nil {
			return fail(StepServiceAccount, err, "annotate it "+p.annotationHint)
		}
		oidc, err = e.opts.ServiceAccounts.Token(ctx, sa, audiences)
		if err != nil {
			return fail(StepTokenRequest, err, "the controller needs create on serviceaccounts/token in the namespace (config/rbac)")
		}
		token, err = p.p.NewTokenForServiceAccount(ctx, oidc, *sa, opts...)
		if err != nil {
			return fail(StepRoleAssumption, err, fmt.Sprintf(p.roleHint, id.Namespace, id.ServiceAccount), oidc)
		}
	}
	secrets := append([]string{oidc}, tokenSecrets(token)...)
	creds, err := p.p.NewArtifactRegistryCredentials(ctx, input, token, opts...)
	if err != nil {
		return fail(StepRegistryToken, err, p.registryHint, secrets...)
	}
	ac, err := creds.Authorization()
	if err != nil {
		return fail(StepRegistryToken, err, p.registryHint, secrets...)
	}
	cred := auth.Credential{Username: ac.Username, Password: ac.Password, RefreshToken: ac.IdentityToken, AccessToken: ac.RegistryToken}
	if cred == auth.EmptyCredential {
		return fail(StepRegistryToken, errors.New("the answer holds no credential"), p.registryHint)
	}
	return cred, creds.ExpiresAt, nil
}

// provider is a cloud provider of fluxcd/pkg/auth with what its errors tell the user.
type provider struct {
	name v1alpha1.RegistryProvider
	p    fluxauth.ArtifactRegistryCredentialsProvider
	// registries and registryForm describe its registry hosts.
	registries, registryForm string
	// annotationHint says how a ServiceAccount names its cloud identity.
	annotationHint string
	// roleHint says what lets a ServiceAccount (%s/%s) assume its cloud identity.
	roleHint string
	// registryHint says what the cloud identity needs to read the registry.
	registryHint string
	// controllerHint says how the controller's own identity is set up; ambientHint a machine's.
	controllerHint, ambientHint string
}

func providers(tr func(*http.Transport), timeout time.Duration) map[v1alpha1.RegistryProvider]*provider {
	hc := newHTTPClient(tr, timeout)
	out := map[v1alpha1.RegistryProvider]*provider{}
	for _, p := range []*provider{awsProvider(tr, timeout), azureProvider(hc), gcpProvider(hc)} {
		out[p.name] = p
	}
	return out
}
