package source

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"oras.land/oras-go/v2/registry/remote/auth"
)

// Mirrored and overridden references. A reference keeps its name (as written) for everything
// that decides or remembers: the memory and disk caches, access proofs of cached content, tag
// resolutions and listings remembered, trust policies and status. Where it is read from (its
// locations) is decided per call: the overrides, then the mirrors of the current MirrorSets,
// then the mirrors of the caller (WithCallerMirrors) for reads by digest, then the source unless
// a mirror set says NeverContactSource.
//
// This is where mirroring could open a hole in "cached content only for who may read it": the
// same digest from a mirror and from the source is one cache entry, so a caller's access is
// proved at a location of its own reference, with the credential its pull secret holds for
// that location's host (never the source host's), and remembered per location and credential.
// A mirror that serves other bytes under a digest is caught by the digest checks of every
// manifest and blob read (pull.go); a mirror is written by whoever configures the controller
// (flags, cluster-scoped mirror sets), never by a Package. A caller's own mirrors (a
// HostedCluster's, for the Packages of its namespace) come with the caller's view of the
// client, so they reach no other caller's reads: everything remembered across callers is keyed
// by location, or by the chain of locations (chainKey), computed from the caller's own view.

// WithCallerMirrors returns a view of c for one caller, with mirrors of the caller's own: digest
// mirrors tried, for its reads by digest (content, access proofs, locations, signatures; never a
// tag resolution or listing), after the client's mirror sets and before the source. The view
// shares everything else of c (configuration, transport, caches, the mirror sets SetMirrorSets
// replaces); the mirrors apply to the calls made through it and to nothing else. Without sets it
// is c; on a view, the sets replace the view's.
//
// A view rather than an argument: the mirrors follow a call through every path that reads by
// digest (Pull, Authorize, Locate, LocateRepository and so source/signature's verifications,
// ResolveVersion's pulls) without a parameter of their own in each. A call merged into
// another's shared request (flight.go) shares it only under a key that names the locations, so
// it never reads through mirrors it was not given.
func (c *Client) WithCallerMirrors(sets []MirrorSet) *Client {
	if len(sets) == 0 {
		return c
	}
	return &Client{shared: c.shared, caller: sets}
}

// HasCallerMirrors reports whether c is a view with mirrors of the caller's own
// (WithCallerMirrors).
func (c *Client) HasCallerMirrors() bool { return len(c.caller) > 0 }

// withoutCallerMirrors returns the client c is a view of, without the caller's own mirrors.
func (c *Client) withoutCallerMirrors() *Client {
	if !c.HasCallerMirrors() {
		return c
	}
	return &Client{shared: c.shared}
}

// callerOnly reports whether loc is a location of ref only through the caller's own mirrors.
// Such a mirror is written by whoever writes the caller's HostedCluster, who may run a registry
// that answers yes for every digest: its yes proves access to what is read from it, never to
// what is kept under ref's name (content, renders, verdicts another caller's read left).
func (c *Client) callerOnly(ref, loc Reference) bool {
	if !c.HasCallerMirrors() {
		return false
	}
	for _, l := range c.withoutCallerMirrors().locationsOf(ref, kindOf(ref)) {
		if l.Name() == loc.Name() {
			return false
		}
	}
	return true
}

// SetMirrorSets replaces the mirror sets that later calls read through (the controller's watch
// of ImageDigestMirrorSets and ImageTagMirrorSets), for the client and its views alike. A call
// in progress keeps the sets it began with.
func (c *Client) SetMirrorSets(m MirrorSets) {
	c.mirrors.Store(&m)
}

// Locations returns where the client (or the caller's view of it) reads ref from, in the order
// it tries them.
func (c *Client) Locations(ref Reference) []Reference {
	return c.locationsOf(ref, kindOf(ref))
}

// locationsOf returns where ref is read from through mirrors of kind.
func (c *Client) locationsOf(ref Reference, kind mirrorKind) []Reference {
	return c.mirrors.Load().locations(ref, c.opts.Overrides, kind, c.caller)
}

// mirrored tells whether ref is read from anywhere but where it is named.
func mirrored(ref Reference, locs []Reference) bool {
	return len(locs) != 1 || locs[0].Name() != ref.Name()
}

// tried joins the failures of every location of ref. With one location its error stands
// alone, as without mirrors.
func tried(ref Reference, locs []Reference, errs []error) error {
	switch {
	case len(locs) == 0:
		return fmt.Errorf("%s: no location to read it from: every mirror set of its source says NeverContactSource and lists no mirror", ref.Name())
	case len(errs) == 1 && !mirrored(ref, locs):
		return errs[0]
	}
	parts := make([]string, len(errs))
	args := make([]any, len(errs))
	for i, err := range errs {
		parts[i] = "%w"
		args[i] = err
	}
	return fmt.Errorf("every location of %s failed: "+strings.Join(parts, "; "), append([]any{ref.Name()}, args...)...)
}

// resolveChain resolves ref's tag at the first of its locations that answers, and proves there
// that the location's credential may read the digest. It returns the digest and the location.
func (c *Client) resolveChain(ctx context.Context, ref Reference, creds Credentials) (string, Reference, error) {
	if ref.Digest != "" {
		return ref.Digest, Reference{}, nil
	}
	locs := c.Locations(ref)
	var errs []error
	for _, loc := range locs {
		cred, err := c.credential(ctx, loc.Registry, creds)
		if err == nil {
			var dgst string
			if dgst, err = c.resolve(ctx, loc, cred); err == nil {
				return dgst, loc.WithDigest(dgst), nil
			}
		}
		if ctx.Err() != nil {
			return "", Reference{}, err
		}
		errs = append(errs, err)
	}
	return "", Reference{}, tried(ref, locs, errs)
}

// authorizeChain proves that creds may read ref.Digest at one of ref's locations, in order, as
// Authorize does at one: a recent proof for that location and the credential the pull secret
// holds for its host, or one HEAD request there. It returns the location and the credential.
func (c *Client) authorizeChain(ctx context.Context, ref Reference, creds Credentials) (Reference, auth.Credential, error) {
	locs := c.Locations(ref)
	var errs []error
	for _, loc := range locs {
		cred, err := c.credential(ctx, loc.Registry, creds)
		if err == nil {
			if err = c.authorize(ctx, loc, cred); err == nil {
				return loc, cred, nil
			}
		}
		if ctx.Err() != nil {
			return Reference{}, auth.EmptyCredential, err
		}
		errs = append(errs, err)
	}
	return Reference{}, auth.EmptyCredential, tried(ref, locs, errs)
}

// locate returns the location ref.Digest is read from and its credential: the one location
// without a request when ref is not mirrored, else the first that proves access.
func (c *Client) locate(ctx context.Context, ref Reference, creds Credentials) (Reference, auth.Credential, error) {
	locs := c.Locations(ref)
	if len(locs) == 1 {
		cred, err := c.credential(ctx, locs[0].Registry, creds)
		return locs[0], cred, err
	}
	return c.authorizeChain(ctx, ref, creds)
}

// Locate returns the location (registry and repository, with ref's tag and digest) that the
// caller reads ref.Digest from: ref itself when neither overridden nor mirrored, the one
// location when only overridden (neither costs a request), else the first of its locations
// where creds may read the digest, proved as Authorize proves it (free after a Pull or
// Authorize within the access TTL). Status names it.
func (c *Client) Locate(ctx context.Context, ref Reference, creds Credentials) (Reference, error) {
	if ref.Digest == "" {
		return Reference{}, fmt.Errorf("locate %s: the reference names no digest", ref)
	}
	loc, _, err := c.locate(ctx, ref, creds)
	if err != nil {
		return Reference{}, fmt.Errorf("pull %s: %w", ref, err)
	}
	return loc, nil
}

// chainKey identifies ref's locations and the credentials creds holds for each, without
// keeping the secrets: what a remembered resolution or listing was answered with. Keyed by the
// source credential alone, a caller without access to the mirror would be told what the
// mirror told another.
func (c *Client) chainKey(ctx context.Context, ref Reference, kind mirrorKind, creds Credentials) (string, error) {
	h := sha256.New()
	for _, loc := range c.locationsOf(ref, kind) {
		cred, err := c.credential(ctx, loc.Registry, creds)
		if err != nil {
			return "", err
		}
		h.Write([]byte(loc.Name()))
		h.Write([]byte{0})
		h.Write([]byte(credentialKey(loc.Registry, cred)))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
