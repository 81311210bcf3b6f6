package source

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync/atomic"

	"golang.org/x/net/http/httpproxy"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/retry"
)

// authCacheEntries bounds the number of registries and credentials whose auth scheme is kept.
const authCacheEntries = 1024

// Client talks to OCI registries. It is safe for concurrent use; share one per process so
// pulls of one digest are merged and cached. WithCallerMirrors makes a view of it for one
// caller, which shares all of it.
type Client struct {
	*shared
	// caller are the caller's own mirrors (WithCallerMirrors), nil for the client itself.
	caller []MirrorSet
}

// shared is what a Client and its views (WithCallerMirrors) share: the configuration, the
// transport, the caches and the mirror sets.
type shared struct {
	opts       Options
	limits     Limits
	httpClient *http.Client
	tlsGiven   bool

	// tokens holds the registries' tokens, per credential, so a token obtained with one
	// caller's credentials is never sent on behalf of another caller; bounded in bytes.
	tokens *tokenStore

	// memory and disk hold content per repository and digest; access remembers which
	// credential the registry let read which of them.
	memory *memoryCache
	disk   *diskCache
	flight flightGroup
	access *accessCache
	// pullBudget bounds the bytes that pulls in flight hold unpacked (Options.PullBytes).
	pullBudget *pullBudget

	// resolutions remembers recent tag resolutions for ResolveWithin.
	resolutions *resolutionCache
	// tagLists remembers recent tag listings for TagsWithin.
	tagLists *tagListCache
	// mirrors are the mirror sets reads go through (locations.go).
	mirrors atomic.Pointer[MirrorSets]
}

// NewClient returns a Client. It fails on an unusable CA bundle, on a Transport together with
// RefuseLocalAddresses (the dial check lives in the transport built here), and on a PullBytes
// below Limits.MaxUncompressedBytes.
func NewClient(opts Options) (*Client, error) {
	if opts.Transport != nil && opts.RefuseLocalAddresses {
		return nil, errors.New("RefuseLocalAddresses is enforced by the transport NewClient builds: it cannot be combined with a Transport")
	}
	limits := opts.Limits.withDefaults()
	budget, err := newPullBudget(opts.PullBytes, limits)
	if err != nil {
		return nil, err
	}
	base := opts.Transport
	tlsGiven := len(opts.CABundle) > 0 || opts.InsecureSkipTLSVerify
	if base == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: opts.InsecureSkipTLSVerify}
		if len(opts.CABundle) > 0 {
			pool, err := x509.SystemCertPool()
			if err != nil {
				pool = x509.NewCertPool()
			}
			if !pool.AppendCertsFromPEM(opts.CABundle) {
				return nil, errors.New("CA bundle holds no PEM certificate")
			}
			cfg.RootCAs = pool
		}
		t.TLSClientConfig = cfg
		env := httpproxy.FromEnvironment()
		t.Proxy = opts.proxyFunc(env)
		t.DialContext = opts.dialer(proxyAddresses(env))
		t.MaxResponseHeaderBytes = maxResponseHeaderBytes
		t.ResponseHeaderTimeout = responseHeaderTimeout
		base = t
		if !opts.RefuseLocalAddresses {
			base = redirectGuard{next: t}
		}
	}
	if opts.UserAgent == "" {
		opts.UserAgent = "pkgsync"
	}
	// oras' retry transport backs off on 429 and 5xx answers (5 retries, at most 3s apart);
	// the bodies of the answers it retries are closed unread.
	httpClient := &http.Client{Transport: budgetTransport{next: retry.NewTransport(base)}}
	if opts.RefuseLocalAddresses {
		// oras' own redirect checks (leaving the origin, token realms) call this one too.
		httpClient.CheckRedirect = opts.checkRedirect
	}
	c := &Client{shared: &shared{
		opts:        opts,
		limits:      limits,
		pullBudget:  budget,
		httpClient:  httpClient,
		tlsGiven:    tlsGiven,
		tokens:      newTokenStore(tokenCacheBytes),
		memory:      newMemoryCache(opts.CacheBytes),
		access:      newAccessCache(opts.AccessTTL),
		resolutions: newResolutionCache(),
		tagLists:    newTagListCache(),
	}}
	if opts.CacheDir != "" {
		c.disk = &diskCache{dir: opts.CacheDir}
	}
	if err := opts.MirrorSets.Validate(); err != nil {
		return nil, err
	}
	c.SetMirrorSets(opts.MirrorSets)
	return c, nil
}

// plainHTTP tells whether host is reached over plain HTTP: when listed, or when it is a
// loopback registry and neither TLS options nor RefuseLocalAddresses say otherwise.
func (c *Client) plainHTTP(host string) bool {
	if slices.Contains(c.opts.PlainHTTPHosts, host) {
		return true
	}
	return !c.tlsGiven && !c.opts.RefuseLocalAddresses && isLoopback(host)
}

// isLoopback tells whether host (host or host:port) is localhost or a loopback IP.
func isLoopback(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// repository returns an oras repository for ref, authenticated with creds (or the client's
// default credentials when creds is nil).
func (c *Client) repository(ctx context.Context, ref Reference, creds Credentials) (*remote.Repository, error) {
	cred, err := c.credential(ctx, ref.Registry, creds)
	if err != nil {
		return nil, err
	}
	return c.repositoryWith(ref, cred), nil
}

// repositoryWith returns an oras repository for ref, authenticated with cred.
func (c *Client) repositoryWith(ref Reference, cred auth.Credential) *remote.Repository {
	client := &auth.Client{
		Client:     c.httpClient,
		Credential: auth.StaticCredential(ref.Registry, cred),
		Cache:      c.authCache(ref.Registry, cred),
	}
	client.SetUserAgent(c.opts.UserAgent)
	endpoint := ref.Registry
	if endpoint == "docker.io" {
		// Docker Hub's name is not its API endpoint; docker, crane and oras make the same swap.
		endpoint = "registry-1.docker.io"
	}
	return &remote.Repository{
		Client:    client,
		Reference: registry.Reference{Registry: endpoint, Repository: ref.Repository},
		PlainHTTP: c.plainHTTP(ref.Registry),
	}
}

// credential looks up the credential for host in creds, or in the client's default
// credentials when creds is nil.
func (c *Client) credential(ctx context.Context, host string, creds Credentials) (auth.Credential, error) {
	if creds == nil {
		creds = c.opts.Credentials
	}
	if creds == nil {
		return auth.EmptyCredential, nil
	}
	cred, err := creds(ctx, host)
	if err != nil {
		return auth.EmptyCredential, fmt.Errorf("look up credentials for %s: %w", host, err)
	}
	return cred, nil
}

// authCache returns the token cache shared by every call with this registry and credential.
func (c *Client) authCache(host string, cred auth.Credential) auth.Cache {
	return c.tokens.forCredential(credentialKey(host, cred))
}

// credentialKey identifies a registry host and credential without keeping the secret itself.
func credentialKey(host string, cred auth.Credential) string {
	h := sha256.New()
	for _, s := range []string{host, cred.Username, cred.Password, cred.RefreshToken, cred.AccessToken} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Resolve returns the manifest digest ref names. A digest-pinned reference answers without a
// request; a tag costs one HEAD request (at each of its locations until one answers) and no
// download. A tag resolved with creds also proves that creds may read the digest there, so that
// pulling it from the cache next costs no request.
func (c *Client) Resolve(ctx context.Context, ref Reference, creds Credentials) (string, error) {
	dgst, _, err := c.resolveChain(ctx, ref, creds)
	return dgst, err
}

// resolve is Resolve with the credential looked up.
func (c *Client) resolve(ctx context.Context, ref Reference, cred auth.Credential) (string, error) {
	if ref.Digest != "" {
		return ref.Digest, nil
	}
	if ref.Tag == "" {
		return "", fmt.Errorf("resolve %s: the reference names neither a tag nor a digest", ref)
	}
	sent := c.access.now()
	desc, err := c.repositoryWith(ref, cred).Resolve(ctx, ref.Tag)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", ref, c.explain(ref, err))
	}
	dgst := desc.Digest.String()
	c.access.record(ref.WithDigest(dgst), cred, sent)
	return dgst, nil
}
