package receiver

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// recordingWaker records the notifications it is told; repositories in followed are followed.
type recordingWaker struct {
	mu       sync.Mutex
	followed map[string]bool
	got      []Notification
}

// Wake records each tag of p as a notification, tags in order.
func (w *recordingWaker) Wake(_ context.Context, p Push) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, tag := range slices.Sorted(maps.Keys(p.Tags)) {
		w.got = append(w.got, Notification{Registry: p.Registry, Repository: p.Repository, Tag: tag, Digest: p.Tags[tag]})
	}
	return w.followed[p.Key()]
}

type staticKeys map[Source]string

func (k staticKeys) Key(_ context.Context, s Source) ([]byte, error) {
	if v, ok := k[s]; ok {
		return []byte(v), nil
	}
	return nil, errNoKey
}

type failingKeys struct{}

func (failingKeys) Key(context.Context, Source) ([]byte, error) { return nil, errors.New("API down") }

const distributionPush = `{"events":[{"id":"1","action":"push","target":{"mediaType":"application/vnd.oci.image.manifest.v1+json",
"digest":"sha256:aaaa","repository":"team/app","tag":"v2"},"request":{"host":"registry.example.com"}},
{"id":"2","action":"push","target":{"mediaType":"application/octet-stream","digest":"sha256:bbbb","repository":"team/app"}},
{"id":"3","action":"pull","target":{"repository":"team/other","tag":"v1"}}]}`

// count reads pkgsync_webhook_requests_total{source,outcome}.
func count(t *testing.T, m *Metrics, source, outcome string) float64 {
	t.Helper()
	var out dto.Metric
	require.NoError(t, m.requests.WithLabelValues(source, outcome).Write(&out))
	return out.GetCounter().GetValue()
}

func sign(key, body string) string {
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

func newTestReceiver(t *testing.T, k keys) (*Receiver, *recordingWaker, *Metrics) {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	w := &recordingWaker{followed: map[string]bool{"team/app": true}}
	return New(Options{Keys: k, Waker: w, Metrics: m}), w, m
}

func post(h http.Handler, path, body string, header map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestAuthentication: only a request with the source's token or signature is read; every other
// is answered 401 and counted, and wakes nothing.
func TestAuthentication(t *testing.T) {
	t.Parallel()
	keys := staticKeys{Distribution: "dist-token", Generic: "generic-key"}
	generic := `{"repository":"team/app","tag":"v2"}`
	cases := []struct {
		name, path, body string
		header           map[string]string
		status           int
		outcome          string
	}{
		{"bearer token", "/hooks/distribution", distributionPush, map[string]string{"Authorization": "Bearer dist-token"}, http.StatusAccepted, OutcomeWoke},
		{"no credentials", "/hooks/distribution", distributionPush, nil, http.StatusUnauthorized, OutcomeUnauthenticated},
		{"wrong token", "/hooks/distribution", distributionPush, map[string]string{"Authorization": "Bearer dist-tokeN"}, http.StatusUnauthorized, OutcomeUnauthenticated},
		{"token prefix", "/hooks/distribution", distributionPush, map[string]string{"Authorization": "Bearer dist"}, http.StatusUnauthorized, OutcomeUnauthenticated},
		{"not bearer", "/hooks/distribution", distributionPush, map[string]string{"Authorization": "Basic dist-token"}, http.StatusUnauthorized, OutcomeUnauthenticated},
		{"another source's token", "/hooks/distribution", distributionPush, map[string]string{"Authorization": "Bearer generic-key"}, http.StatusUnauthorized, OutcomeUnauthenticated},
		{"source without a key", "/hooks/harbor", `{"type":"PUSH_ARTIFACT"}`, map[string]string{"Authorization": "Bearer "}, http.StatusUnauthorized, OutcomeUnauthenticated},
		{"signature", "/hooks/generic", generic, map[string]string{SignatureHeader: sign("generic-key", generic)}, http.StatusAccepted, OutcomeWoke},
		{"signature of another body", "/hooks/generic", `{"repository":"team/app","tag":"v3"}`, map[string]string{SignatureHeader: sign("generic-key", generic)}, http.StatusUnauthorized, OutcomeUnauthenticated},
		{"signature with another key", "/hooks/generic", generic, map[string]string{SignatureHeader: sign("dist-token", generic)}, http.StatusUnauthorized, OutcomeUnauthenticated},
		{"signature not hex", "/hooks/generic", generic, map[string]string{SignatureHeader: "sha256=zz"}, http.StatusUnauthorized, OutcomeUnauthenticated},
		// A signature header that fails is not rescued by a token beside it.
		{"bad signature, good token", "/hooks/generic", generic, map[string]string{SignatureHeader: "sha256=00", "Authorization": "Bearer generic-key"}, http.StatusUnauthorized, OutcomeUnauthenticated},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h, w, m := newTestReceiver(t, keys)
			rec := post(h, c.path, c.body, c.header)
			assert.Equal(t, c.status, rec.Code, rec.Body.String())
			source := strings.TrimPrefix(c.path, PathPrefix)
			assert.Equal(t, 1.0, count(t, m, source, c.outcome), "counted")
			if c.status == http.StatusUnauthorized {
				assert.Empty(t, w.got, "an unauthenticated request wakes nothing")
				assert.NotContains(t, rec.Body.String(), "key", "the answer does not say what failed")
			}
		})
	}
}

// TestBodyBounded: a body over MaxBodyBytes is refused before it is authenticated or decoded.
func TestBodyBounded(t *testing.T) {
	t.Parallel()
	h, w, m := newTestReceiver(t, staticKeys{Generic: "k"})
	big := `{"repository":"team/app","tag":"v2","pad":"` + strings.Repeat("x", MaxBodyBytes) + `"}`
	rec := post(h, "/hooks/generic", big, map[string]string{"Authorization": "Bearer k"})
	assert.Equal(t, http.StatusRequestEntityTooLarge, rec.Code)
	assert.Empty(t, w.got)
	assert.Equal(t, 1.0, count(t, m, "generic", OutcomeInvalid))
}

func TestRequestsThatAreNotNotifications(t *testing.T) {
	t.Parallel()
	h, w, m := newTestReceiver(t, staticKeys{Generic: "k", Harbor: "h"})
	auth := map[string]string{"Authorization": "Bearer k"}

	rec := post(h, "/hooks/nexus", `{}`, auth)
	assert.Equal(t, http.StatusNotFound, rec.Code)
	assert.Equal(t, 1.0, count(t, m, "unknown", OutcomeInvalid))

	req := httptest.NewRequest(http.MethodGet, "/hooks/generic", nil)
	rr := httptest.NewRecorder()
	h.ServeHTTP(rr, req)
	assert.Equal(t, http.StatusMethodNotAllowed, rr.Code)

	for _, body := range []string{`not json`, `{"tag":"v1"}`, `{"repository":"Team/App"}`, `{"repository":"team/app","tag":"-x"}`,
		`{"repository":"team/app","tag":"` + strings.Repeat("t", 129) + `"}`, `{"repository":"a/../b"}`} {
		rec := post(h, "/hooks/generic", body, auth)
		assert.Equal(t, http.StatusBadRequest, rec.Code, body)
	}
	assert.Equal(t, 7.0, count(t, m, "generic", OutcomeInvalid))

	rec = post(h, "/hooks/harbor", `{"type":"PULL_ARTIFACT","event_data":{"repository":{"repo_full_name":"team/app"},"resources":[{"tag":"v1"}]}}`,
		map[string]string{"Authorization": "Bearer h"})
	assert.Equal(t, http.StatusAccepted, rec.Code)
	assert.Equal(t, 1.0, count(t, m, "harbor", OutcomeIgnored))
	assert.Empty(t, w.got)
}

func TestUnfollowedAndUnavailable(t *testing.T) {
	t.Parallel()
	h, w, m := newTestReceiver(t, staticKeys{Generic: "k"})
	rec := post(h, "/hooks/generic", `{"repository":"nobody/follows","tag":"v1"}`, map[string]string{"Authorization": "Bearer k"})
	assert.Equal(t, http.StatusAccepted, rec.Code)
	assert.Equal(t, 1.0, count(t, m, "generic", OutcomeUnfollowed))
	assert.Len(t, w.got, 1)

	h, _, m = newTestReceiver(t, failingKeys{})
	rec = post(h, "/hooks/generic", `{"repository":"team/app"}`, map[string]string{"Authorization": "Bearer k"})
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Equal(t, 1.0, count(t, m, "generic", OutcomeUnavailable))
}

func TestDecode(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		source Source
		body   string
		want   []Notification
	}{
		{"distribution: manifest pushes by tag only", Distribution, distributionPush, []Notification{{Repository: "team/app", Tag: "v2"}}},
		{"distribution: the digest as a hint", Distribution, `{"events":[{"action":"push","target":{"repository":"a/b","tag":"v1","digest":"sha256:` + strings.Repeat("ab", 32) + `"}}]}`,
			[]Notification{{Repository: "a/b", Tag: "v1", Digest: "sha256:" + strings.Repeat("ab", 32)}}},
		{"distribution: repeated events once", Distribution, `{"events":[{"action":"push","target":{"repository":"a/b","tag":"v1"}},{"action":"push","target":{"repository":"a/b","tag":"v1"}}]}`,
			[]Notification{{Repository: "a/b", Tag: "v1"}}},
		{"harbor: every tag of the artifact", Harbor, `{"type":"PUSH_ARTIFACT","occur_at":1,"operator":"admin","event_data":{"resources":[
			{"digest":"sha256:forged","tag":"v1","resource_url":"evil.example.com/library/app:v1"},{"tag":"latest"}],
			"repository":{"date_created":1,"name":"app","namespace":"library","repo_full_name":"library/app","repo_type":"private"}}}`,
			[]Notification{{Repository: "library/app", Tag: "v1"}, {Repository: "library/app", Tag: "latest"}}},
		{"harbor: namespace and name", Harbor, `{"type":"PUSH_ARTIFACT","event_data":{"resources":[{"tag":"v1"}],"repository":{"name":"app","namespace":"library"}}}`,
			[]Notification{{Repository: "library/app", Tag: "v1"}}},
		{"harbor: push by digest", Harbor, `{"type":"PUSH_ARTIFACT","event_data":{"resources":[{"digest":"sha256:aa"}],"repository":{"repo_full_name":"library/app"}}}`, nil},
		{"generic: path", Generic, `{"repository":"team/app","tag":"v1","digest":"sha256:forged"}`, []Notification{{Repository: "team/app", Tag: "v1"}}},
		{"generic: registry and path, any tag", Generic, `{"repository":"registry.example.com:5000/team/app"}`,
			[]Notification{{Registry: "registry.example.com:5000", Repository: "team/app"}}},
		{"generic: localhost", Generic, `{"repository":"localhost/app"}`, []Notification{{Registry: "localhost", Repository: "app"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := decode(c.source, []byte(c.body))
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
		})
	}
}

// FuzzDecode: no payload makes decoding panic, and whatever it returns names a valid repository.
func FuzzDecode(f *testing.F) {
	f.Add(string(Distribution), distributionPush)
	f.Add(string(Harbor), `{"type":"PUSH_ARTIFACT","event_data":{"resources":[{"tag":"v1"}],"repository":{"repo_full_name":"library/app"}}}`)
	f.Add(string(Generic), `{"repository":"registry.example.com/team/app","tag":"v1"}`)
	f.Fuzz(func(t *testing.T, source, body string) {
		got, err := decode(Source(source), []byte(body))
		if err != nil {
			return
		}
		for _, n := range got {
			if err := n.validate(); err != nil {
				t.Fatalf("decode returned an invalid notification %+v: %v", n, err)
			}
		}
	})
}

// TestSecretKeys reads keys from a Secret, at most once per TTL, and takes a rotated key after it.
func TestSecretKeys(t *testing.T) {
	t.Parallel()
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "pkgsync-system", Name: "pkgsync-webhook"},
		Data: map[string][]byte{"distribution": []byte("one")}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(secret).Build()
	now := metav1.Now().Time
	k := &SecretKeys{Reader: c, Secret: client.ObjectKeyFromObject(secret), now: func() time.Time { return now }}

	key, err := k.Key(t.Context(), Distribution)
	require.NoError(t, err)
	assert.Equal(t, "one", string(key))
	_, err = k.Key(t.Context(), Harbor)
	assert.ErrorIs(t, err, errNoKey, "a source without a key is disabled")

	secret.Data["distribution"] = []byte("two")
	require.NoError(t, c.Update(t.Context(), secret))
	key, _ = k.Key(t.Context(), Distribution)
	assert.Equal(t, "one", string(key), "read again only after the TTL")
	now = now.Add(secretKeysTTL)
	key, _ = k.Key(t.Context(), Distribution)
	assert.Equal(t, "two", string(key), "a rotated key is taken after the TTL")

	require.NoError(t, c.Delete(t.Context(), secret))
	now = now.Add(secretKeysTTL)
	_, err = k.Key(t.Context(), Distribution)
	assert.ErrorIs(t, err, errNoKey, "without the Secret every source is disabled")
}

// countingReader counts its reads and fails them with err.
type countingReader struct {
	client.Reader
	mu    sync.Mutex
	reads int
	err   error
}

func (r *countingReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reads++
	return r.err
}

// TestSecretKeysFailureRemembered: when the Secret cannot be read (forbidden, API server down),
// a flood of requests, unauthenticated ones included, does not turn into one API request each:
// the failure is remembered for secretRetry.
func TestSecretKeysFailureRemembered(t *testing.T) {
	t.Parallel()
	r := &countingReader{err: apierrors.NewForbidden(corev1.Resource("secrets"), "pkgsync-webhook", errors.New("no RBAC"))}
	now := time.Now()
	k := &SecretKeys{Reader: r, Secret: client.ObjectKey{Namespace: "pkgsync-system", Name: "pkgsync-webhook"}, now: func() time.Time { return now }}
	for range 100 {
		_, err := k.Key(t.Context(), Distribution)
		require.Error(t, err)
		assert.NotErrorIs(t, err, errNoKey)
	}
	assert.Equal(t, 1, r.reads, "one read per secretRetry, however many requests")
	now = now.Add(secretRetry)
	_, err := k.Key(t.Context(), Distribution)
	require.Error(t, err)
	assert.Equal(t, 2, r.reads, "read again after secretRetry")
}

// TestRegistryBinding: a source bound to registries (Options.Registries) names a path in those
// registries only; a generic payload naming another registry wakes nobody; an unbound source
// names the path in every registry.
func TestRegistryBinding(t *testing.T) {
	t.Parallel()
	keys := staticKeys{Distribution: "dist-token", Generic: "generic-key"}
	bearer := func(k string) map[string]string { return map[string]string{"Authorization": "Bearer " + k} }
	for _, tt := range []struct {
		name, path, body, key string
		want                  []Notification
	}{
		{"distribution, bound", PathPrefix + "distribution", `{"events":[{"action":"push","target":{"repository":"team/app","tag":"v2"}}]}`, "dist-token",
			[]Notification{{Registry: "a.example.com", Repository: "team/app", Tag: "v2"}, {Registry: "a.example.com:5000", Repository: "team/app", Tag: "v2"}}},
		{"generic naming its registry", PathPrefix + "generic", `{"repository":"A.example.com/team/app","tag":"v2"}`, "generic-key",
			[]Notification{{Registry: "A.example.com", Repository: "team/app", Tag: "v2"}}},
		{"generic naming another registry", PathPrefix + "generic", `{"repository":"b.example.com/team/app","tag":"v2"}`, "generic-key", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := NewMetrics(prometheus.NewRegistry())
			require.NoError(t, err)
			w := &recordingWaker{}
			h := New(Options{Keys: keys, Waker: w, Metrics: m, Registries: map[Source][]string{
				Distribution: {"a.example.com", "a.example.com:5000"}, Generic: {"a.example.com"}}})
			rec := post(h, tt.path, tt.body, bearer(tt.key))
			assert.Equal(t, http.StatusAccepted, rec.Code)
			assert.Equal(t, tt.want, w.got)
		})
	}
	t.Run("unbound", func(t *testing.T) {
		t.Parallel()
		h, w, _ := newTestReceiver(t, keys)
		rec := post(h, PathPrefix+"distribution", `{"events":[{"action":"push","target":{"repository":"team/app","tag":"v2"}}]}`, bearer("dist-token"))
		assert.Equal(t, http.StatusAccepted, rec.Code)
		assert.Equal(t, []Notification{{Repository: "team/app", Tag: "v2"}}, w.got)
	})
}

// signAt signs body as sent at unix time at: the MAC covers "AT.BODY".
func signAt(key string, at int64, body string) map[string]string {
	ts := strconv.FormatInt(at, 10)
	return map[string]string{"X-Pkgsync-Timestamp": ts, SignatureHeader: sign(key, ts+"."+body)}
}

// TestSignatureTimestamp is issue 41 (8): a signed request seen on the way (plain HTTP, a
// proxy's log) could be sent again at any time. A sender that puts the time it signed in
// X-Pkgsync-Timestamp, inside the MAC, has its requests refused once they are older (or
// newer) than a few minutes; a signature without a timestamp is still taken, as documented.
func TestSignatureTimestamp(t *testing.T) {
	t.Parallel()
	keys := staticKeys{Generic: "k"}
	body := `{"repository":"team/app","tag":"v2"}`
	now := time.Now().Unix()
	moved := signAt("k", now, body)
	moved["X-Pkgsync-Timestamp"] = strconv.FormatInt(now+1, 10)
	stripped := signAt("k", now, body)
	delete(stripped, "X-Pkgsync-Timestamp")
	cases := []struct {
		name   string
		header map[string]string
		status int
	}{
		{"signed now", signAt("k", now, body), http.StatusAccepted},
		{"signed a minute ago", signAt("k", now-60, body), http.StatusAccepted},
		{"replayed after ten minutes", signAt("k", now-600, body), http.StatusUnauthorized},
		{"dated ten minutes ahead", signAt("k", now+600, body), http.StatusUnauthorized},
		{"timestamp changed after signing", moved, http.StatusUnauthorized},
		{"timestamp taken off", stripped, http.StatusUnauthorized},
		{"timestamp not a number", map[string]string{"X-Pkgsync-Timestamp": "soon", SignatureHeader: sign("k", "soon."+body)}, http.StatusUnauthorized},
		{"no timestamp, as before", map[string]string{SignatureHeader: sign("k", body)}, http.StatusAccepted},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h, w, _ := newTestReceiver(t, keys)
			rec := post(h, "/hooks/generic", body, c.header)
			assert.Equal(t, c.status, rec.Code, rec.Body.String())
			if c.status != http.StatusAccepted {
				assert.Empty(t, w.got)
			}
		})
	}
}

// TestStaleSignatureRefusedBeforeBody: a replayed request whose timestamp is too old is refused
// from its headers, without its body being waited for or taking a slot.
func TestStaleSignatureRefusedBeforeBody(t *testing.T) {
	t.Parallel()
	addr := startServer(t, staticKeys{Distribution: "k"})
	stale := strconv.FormatInt(time.Now().Add(-time.Hour).Unix(), 10)
	code, err := status(stalledPost(t, addr, "X-Pkgsync-Timestamp: "+stale+"\r\n"+SignatureHeader+": sha256=00"), 5*time.Second)
	require.NoError(t, err, "answered before the body is sent")
	assert.Equal(t, http.StatusUnauthorized, code)
}

// TestNotificationsPerRequestBounded: a 1 MiB Distribution envelope holds some 15,000 pushes;
// only the first MaxNotifications are taken, and the answer says so.
func TestNotificationsPerRequestBounded(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString(`{"events":[`)
	n := 0
	for ; b.Len() < MaxBodyBytes-200; n++ {
		if n > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"action":"push","target":{"repository":"team/app-%d","tag":"v1"}}`, n)
	}
	b.WriteString("]}")
	h, w, _ := newTestReceiver(t, staticKeys{Distribution: "k"})
	rec := post(h, "/hooks/distribution", b.String(), map[string]string{"Authorization": "Bearer k"})
	assert.Equal(t, http.StatusAccepted, rec.Code)
	assert.Contains(t, rec.Body.String(), fmt.Sprintf("took the first %d of %d notifications", MaxNotifications, n))
	assert.Equal(t, MaxNotifications, len(w.got), "notifications taken")
}
