package source

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/test/testenv"
)

// TestCallerMirrors: a caller's own mirrors (WithCallerMirrors) serve its reads by digest,
// after the client's mirror sets and before the source, never a tag resolution; another
// caller's reads do not go through them, and what one caller's mirror answered is not
// remembered for the other.
func TestCallerMirrors(t *testing.T) {
	t.Parallel()
	src := testenv.NewRegistry(t, testenv.RegistryOptions{Own: true})
	mirror := testenv.NewRegistry(t, testenv.RegistryOptions{Own: true})
	img := mirroredPackage(t, src, mirror, nil, nil, "team/pkg")
	tagged := mustRef(t, src.Host+"/team/pkg:v1")
	pinned := mustRef(t, src.Host+"/team/pkg@"+img.Digest)
	own := []MirrorSet{{Source: src.Host + "/team", Mirrors: []string{mirror.Host + "/team"}}}

	clusterWide := MirrorSets{Digest: []MirrorSet{{Source: src.Host, Mirrors: []string{"cluster.example/m"}}}}
	names := func(refs []Reference) []string {
		out := []string{}
		for _, r := range refs {
			out = append(out, r.Name())
		}
		return out
	}
	c := newClient(t, Options{MirrorSets: clusterWide})
	withOwn := c.WithCallerMirrors(own)
	assert.Equal(t, []string{"cluster.example/m/team/pkg", mirror.Host + "/team/pkg", src.Host + "/team/pkg"}, names(withOwn.Locations(pinned)))
	assert.Equal(t, []string{"cluster.example/m/team/pkg", src.Host + "/team/pkg"}, names(c.Locations(pinned)))
	assert.Equal(t, []string{src.Host + "/team/pkg"}, names(withOwn.Locations(tagged)), "a tag resolution went through a digest mirror")

	rec := newHostRecorder()
	c = newClient(t, Options{Transport: rec})
	withOwn = c.WithCallerMirrors(own)
	a, err := withOwn.Pull(t.Context(), pinned, nil)
	require.NoError(t, err)
	assert.Equal(t, img.Digest, a.Digest)
	assert.NotEmpty(t, rec.requests(mirror.Host))
	assert.Empty(t, rec.requests(src.Host))
	loc, err := withOwn.Locate(t.Context(), pinned, nil)
	require.NoError(t, err)
	assert.Equal(t, mirror.Host+"/team/pkg", loc.Name())

	// Another caller, the same client: its reads and what status names stay at the source.
	mirrorBefore := len(rec.requests(mirror.Host))
	loc, err = c.Locate(t.Context(), pinned, nil)
	require.NoError(t, err)
	assert.Equal(t, src.Host+"/team/pkg", loc.Name())
	_, err = c.Pull(t.Context(), pinned, nil)
	require.NoError(t, err)
	require.NoError(t, src.Stop())
	// With the source gone, the other caller fails rather than read through the first's mirror.
	_, err = c.Pull(t.Context(), mustRef(t, src.Host+"/team/pkg@"+img.Digest), nil)
	require.NoError(t, err, "proved at the source within the access TTL")
	fresh := newClient(t, Options{Transport: rec})
	_, err = fresh.Pull(t.Context(), pinned, nil)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), mirror.Host)
	assert.Len(t, rec.requests(mirror.Host), mirrorBefore, "another caller's read reached the first caller's mirror")
}

// hostRecorder records, per registry host, the requests a client sends and the Authorization
// headers they carry.
type hostRecorder struct {
	base http.RoundTripper
	mu   sync.Mutex
	reqs map[string][]string // host -> "METHOD path"
	auth map[string][]string // host -> Authorization headers
}

func newHostRecorder() *hostRecorder {
	return &hostRecorder{base: http.DefaultTransport.(*http.Transport).Clone(), reqs: map[string][]string{}, auth: map[string][]string{}}
}

func (h *hostRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	h.mu.Lock()
	h.reqs[req.URL.Host] = append(h.reqs[req.URL.Host], req.Method+" "+req.URL.Path)
	if a := req.Header.Get("Authorization"); a != "" {
		h.auth[req.URL.Host] = append(h.auth[req.URL.Host], a)
	}
	h.mu.Unlock()
	return h.base.RoundTrip(req)
}

func (h *hostRecorder) requests(host string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.reqs[host]...)
}

func (h *hostRecorder) authorizations(host string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.auth[host]...)
}

// dockerConfig returns the credentials of a pull secret holding user:password per host.
func dockerConfig(t *testing.T, hosts map[string][2]string) Credentials {
	t.Helper()
	var entries []string
	for host, up := range hosts {
		entries = append(entries, fmt.Sprintf("%q:{\"auth\":%q}", host, base64.StdEncoding.EncodeToString([]byte(up[0]+":"+up[1]))))
	}
	creds, err := CredentialsFromDockerConfigJSON([]byte(`{"auths":{` + strings.Join(entries, ",") + `}}`))
	require.NoError(t, err)
	return creds
}

// mirroredPackage pushes one built package, with the project's own push, to REPO:v1 of the
// source and of the mirror, and returns the built image.
func mirroredPackage(t *testing.T, src, mirror *testenv.Registry, srcCreds, mirrorCreds Credentials, repo string) *Image {
	t.Helper()
	img, err := Build(testenv.PackageDir(t), BuildOptions{Version: "1.0.0"})
	require.NoError(t, err)
	pusher := newClient(t, Options{})
	for _, target := range []struct {
		reg   *testenv.Registry
		creds Credentials
	}{{src, srcCreds}, {mirror, mirrorCreds}} {
		_, err := pusher.Push(t.Context(), img, []Reference{mustRef(t, target.reg.Host+"/"+repo+":v1")}, target.creds)
		require.NoError(t, err)
	}
	return img
}

// TestOverridesPull: the package, its tag and its tag listing are read where the host and
// prefix overrides say, and the reference keeps its name.
func TestOverridesPull(t *testing.T) {
	t.Parallel()
	mirror := testenv.NewRegistry(t, testenv.RegistryOptions{Own: true})
	pusher := newClient(t, Options{})
	img, _ := pushPackage(t, pusher, mirror.Host, "mirrored/team/pkg", nil)

	for name, o := range map[string]Overrides{
		"host":   {Hosts: map[string]string{"quay.example": mirror.Host}},
		"prefix": {Prefixes: []PrefixOverride{{From: "quay.example/team/", To: mirror.Host + "/mirrored/team/"}}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			repo := "team/pkg"
			if name == "host" {
				repo = "mirrored/team/pkg"
			}
			c := newClient(t, Options{Overrides: o})
			ref := mustRef(t, "quay.example/"+repo+":v1")
			a, err := c.Pull(t.Context(), ref, nil)
			require.NoError(t, err)
			assert.Equal(t, img.Digest, a.Digest)
			loc, err := c.Locate(t.Context(), ref.WithDigest(a.Digest), nil)
			require.NoError(t, err)
			assert.Equal(t, mirror.Host+"/mirrored/team/pkg", loc.Name())
			tags, err := c.Tags(t.Context(), ref, nil)
			require.NoError(t, err)
			assert.Contains(t, tags, "v1")
		})
	}
}

// TestMirrorCredentials: a mirror is read with the credential the pull secret holds for the
// mirror's host; the source host's credential is never sent to it.
func TestMirrorCredentials(t *testing.T) {
	t.Parallel()
	src := testenv.NewRegistry(t, testenv.RegistryOptions{Htpasswd: true})
	mirror := testenv.NewRegistry(t, testenv.RegistryOptions{Htpasswd: true})
	srcUP := [2]string{src.Username, src.Password}
	mirrorUP := [2]string{mirror.Username, mirror.Password}
	img := mirroredPackage(t, src, mirror, dockerConfig(t, map[string][2]string{src.Host: srcUP}),
		dockerConfig(t, map[string][2]string{mirror.Host: mirrorUP}), "team/pkg")
	require.NoError(t, src.Stop())

	rec := newHostRecorder()
	c := newClient(t, Options{Transport: rec, MirrorSets: MirrorSets{
		Tag:    []MirrorSet{{Source: src.Host + "/team", Mirrors: []string{mirror.Host + "/team"}}},
		Digest: []MirrorSet{{Source: src.Host + "/team", Mirrors: []string{mirror.Host + "/team"}}},
	}})
	ref := mustRef(t, src.Host+"/team/pkg:v1")
	both := dockerConfig(t, map[string][2]string{src.Host: srcUP, mirror.Host: mirrorUP})
	a, err := c.Pull(t.Context(), ref, both)
	require.NoError(t, err)
	assert.Equal(t, img.Digest, a.Digest)

	// With only the source's credential, the mirror refuses: the source's is not sent there.
	sourceOnly := dockerConfig(t, map[string][2]string{src.Host: srcUP})
	_, err = c.Pull(t.Context(), mustRef(t, src.Host+"/team/pkg@"+img.Digest), sourceOnly)
	require.ErrorIs(t, err, ErrAuthenticationRequired)
	assert.Contains(t, err.Error(), mirror.Host)
	srcBasic := "Basic " + base64.StdEncoding.EncodeToString([]byte(srcUP[0]+":"+srcUP[1]))
	assert.NotContains(t, rec.authorizations(mirror.Host), srcBasic)
	assert.NotEmpty(t, rec.authorizations(mirror.Host))
}

// TestMirrorCacheAccess: the same digest from a mirror and from the source is one cache entry,
// and a caller gets it only once its own credential for a location of its own reference has
// read it there. A caller without the mirror's credential gets nothing cached, not the digest
// another caller's tag resolution found, and not the content under the mirror's own name.
func TestMirrorCacheAccess(t *testing.T) {
	t.Parallel()
	src := testenv.NewRegistry(t, testenv.RegistryOptions{Htpasswd: true})
	mirror := testenv.NewRegistry(t, testenv.RegistryOptions{Htpasswd: true})
	srcUP := [2]string{src.Username, src.Password}
	mirrorUP := [2]string{mirror.Username, mirror.Password}
	img := mirroredPackage(t, src, mirror, dockerConfig(t, map[string][2]string{src.Host: srcUP}),
		dockerConfig(t, map[string][2]string{mirror.Host: mirrorUP}), "private/pkg")

	sets := []MirrorSet{{Source: src.Host + "/private", Mirrors: []string{mirror.Host + "/private"}, NeverContactSource: true}}
	c := newClient(t, Options{MirrorSets: MirrorSets{Digest: sets, Tag: sets}})
	tenantA := dockerConfig(t, map[string][2]string{src.Host: srcUP, mirror.Host: mirrorUP})
	// Tenant B holds the source's credential, not the mirror's: it may read the source, which
	// this client never contacts.
	tenantB := dockerConfig(t, map[string][2]string{src.Host: srcUP, mirror.Host: {mirror.Username, "wrong"}})

	tagged := mustRef(t, src.Host+"/private/pkg:v1")
	pinned := mustRef(t, src.Host+"/private/pkg@"+img.Digest)
	dgst, err := c.ResolveWithin(t.Context(), tagged, tenantA, time.Hour)
	require.NoError(t, err)
	_, err = c.Pull(t.Context(), pinned, tenantA)
	require.NoError(t, err)
	require.NoError(t, c.Authorize(t.Context(), pinned, tenantA))
	_, err = c.TagsWithin(t.Context(), tagged, tenantA, time.Hour)
	require.NoError(t, err)

	_, err = c.ResolveWithin(t.Context(), tagged, tenantB, time.Hour)
	require.ErrorIs(t, err, ErrAuthenticationRequired, "a remembered resolution answered tenant B")
	_, err = c.TagsWithin(t.Context(), tagged, tenantB, time.Hour)
	require.ErrorIs(t, err, ErrAuthenticationRequired, "a remembered listing answered tenant B")
	for _, ref := range []Reference{pinned, mustRef(t, mirror.Host+"/private/pkg@"+dgst)} {
		_, err = c.Pull(t.Context(), ref, tenantB)
		require.ErrorIs(t, err, ErrAuthenticationRequired, "cached content served to tenant B for %s", ref)
		require.ErrorIs(t, c.Authorize(t.Context(), ref, tenantB), ErrAuthenticationRequired, ref.String())
	}
}

// substitutingProxy serves a registry, answering requests for one manifest digest with
// another manifest's bytes, as a mirror holding other content under the digest would.
func substitutingProxy(t *testing.T, upstream *testenv.Registry, repo, digest, otherDigest string) string {
	t.Helper()
	target, err := url.Parse("http://" + upstream.Host)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/v2/"+repo+"/manifests/"+digest {
			req.URL.Path = "/v2/" + repo + "/manifests/" + otherDigest
			rec := httptest.NewRecorder()
			proxy.ServeHTTP(rec, req)
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.Header().Set("Docker-Content-Digest", digest)
			w.WriteHeader(rec.Code)
			_, _ = io.Copy(w, bytes.NewReader(rec.Body.Bytes()))
			return
		}
		proxy.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// TestMirrorCannotSubstituteContent: a mirror answering a digest with other content, manifest
// or layer, is refused, whatever it claims.
func TestMirrorCannotSubstituteContent(t *testing.T) {
	t.Parallel()
	src := testenv.NewRegistry(t, testenv.RegistryOptions{Own: true})
	mirror := testenv.NewRegistry(t, testenv.RegistryOptions{Own: true})
	img := mirroredPackage(t, src, mirror, nil, nil, "team/pkg")
	pusher := newClient(t, Options{})
	other := pushOther(t, pusher, mustRef(t, mirror.Host+"/team/pkg:other"), "kind: ConfigMap\n")
	require.NoError(t, src.Stop())
	lying := substitutingProxy(t, mirror, "team/pkg", img.Digest, other)

	sets := []MirrorSet{{Source: src.Host + "/team", Mirrors: []string{lying + "/team"}}}
	c := newClient(t, Options{MirrorSets: MirrorSets{Digest: sets}})
	_, err := c.Pull(t.Context(), mustRef(t, src.Host+"/team/pkg@"+img.Digest), nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "digest")

	// Layers: corrupted on the way from the mirror.
	corrupting := newCountingTransport()
	corrupting.corrupt = true
	c = newClient(t, Options{Transport: corrupting, MirrorSets: MirrorSets{Digest: []MirrorSet{{Source: src.Host + "/team", Mirrors: []string{mirror.Host + "/team"}}}}})
	_, err = c.Pull(t.Context(), mustRef(t, src.Host+"/team/pkg@"+img.Digest), nil)
	require.ErrorContains(t, err, "verify")
}

// TestMirrorSetPolicies: digest-pinned references go through digest mirrors only, tags through
// tag mirrors only, and NeverContactSource sends nothing to the source.
func TestMirrorSetPolicies(t *testing.T) {
	t.Parallel()
	src := testenv.NewRegistry(t, testenv.RegistryOptions{Own: true})
	tagMirror := testenv.NewRegistry(t, testenv.RegistryOptions{Own: true})
	digestMirror := testenv.NewRegistry(t, testenv.RegistryOptions{Own: true})
	img := mirroredPackage(t, src, tagMirror, nil, nil, "team/pkg")
	_, err := newClient(t, Options{}).Push(t.Context(), img, []Reference{mustRef(t, digestMirror.Host+"/team/pkg:v1")}, nil)
	require.NoError(t, err)
	tagged := mustRef(t, src.Host+"/team/pkg:v1")
	pinned := mustRef(t, src.Host+"/team/pkg@"+img.Digest)

	never := MirrorSets{
		Tag:    []MirrorSet{{Source: src.Host + "/team", Mirrors: []string{tagMirror.Host + "/team"}, NeverContactSource: true}},
		Digest: []MirrorSet{{Source: src.Host + "/team", Mirrors: []string{digestMirror.Host + "/team"}, NeverContactSource: true}},
	}
	rec := newHostRecorder()
	c := newClient(t, Options{Transport: rec, MirrorSets: never})
	_, err = c.Pull(t.Context(), pinned, nil)
	require.NoError(t, err)
	assert.Empty(t, rec.requests(tagMirror.Host), "a digest-pinned pull went through a tag mirror")
	assert.NotEmpty(t, rec.requests(digestMirror.Host))

	rec = newHostRecorder()
	c = newClient(t, Options{Transport: rec, MirrorSets: never})
	_, err = c.Pull(t.Context(), tagged, nil)
	require.NoError(t, err)
	_, err = c.Tags(t.Context(), tagged, nil)
	require.NoError(t, err)
	assert.Empty(t, rec.requests(digestMirror.Host), "a tag went through a digest mirror")
	assert.NotEmpty(t, rec.requests(tagMirror.Host))
	assert.Empty(t, rec.requests(src.Host), "NeverContactSource")

	// The mirrors lose the content: NeverContactSource fails without asking the source, the
	// default falls back to it.
	require.NoError(t, tagMirror.Stop())
	require.NoError(t, digestMirror.Stop())
	rec = newHostRecorder()
	c = newClient(t, Options{Transport: rec, MirrorSets: never})
	_, err = c.Pull(t.Context(), pinned, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), digestMirror.Host)
	assert.Empty(t, rec.requests(src.Host))

	never.Digest[0].NeverContactSource = false
	c.SetMirrorSets(never)
	a, err := c.Pull(t.Context(), pinned, nil)
	require.NoError(t, err)
	assert.Equal(t, img.Digest, a.Digest)
	loc, err := c.Locate(t.Context(), pinned, nil)
	require.NoError(t, err)
	assert.Equal(t, src.Host, loc.Registry)
}

// TestMirrorAddressRules: a mirror on a loopback address is refused as any registry is, unless
// the operator named it.
func TestMirrorAddressRules(t *testing.T) {
	t.Parallel()
	mirror := testenv.NewRegistry(t, testenv.RegistryOptions{Own: true})
	img, _ := pushPackage(t, newClient(t, Options{}), mirror.Host, "team/pkg", nil)
	sets := MirrorSets{Digest: []MirrorSet{{Source: "quay.example/team", Mirrors: []string{mirror.Host + "/team"}, NeverContactSource: true}}}
	ref := mustRef(t, "quay.example/team/pkg@"+img.Digest)

	_, err := newClient(t, Options{RefuseLocalAddresses: true, MirrorSets: sets}).Pull(t.Context(), ref, nil)
	require.ErrorIs(t, err, ErrLocalAddress)

	a, err := newClient(t, Options{RefuseLocalAddresses: true, PlainHTTPHosts: []string{mirror.Host}, MirrorSets: sets}).Pull(t.Context(), ref, nil)
	require.NoError(t, err)
	assert.Equal(t, img.Digest, a.Digest)
}
