package source

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"oras.land/oras-go/v2/content"

	"pkgsync.dev/pkgsync/test/testenv"
)

// redirectingRegistry is a registry that requires credentials and redirects blob downloads to
// storage on another origin, as registries backed by object storage do.
type redirectingRegistry struct {
	t              *testing.T
	user, password string
	// bearer makes the registry ask for a token from its own /token endpoint instead of basic
	// credentials.
	bearer   bool
	manifest []byte
	storage  string // base URL blob downloads are redirected to
	srv      *httptest.Server
}

const registryToken = "registry-token"

func (r *redirectingRegistry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte(r.user+":"+r.password))
	if req.URL.Path == "/token" {
		if !r.bearer || req.Header.Get("Authorization") != basic {
			http.Error(w, "", http.StatusUnauthorized)
			return
		}
		writeJSON(r.t, w, map[string]string{"token": registryToken})
		return
	}
	switch {
	case r.bearer && req.Header.Get("Authorization") != "Bearer "+registryToken:
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm=%q,service="registry",scope="repository:pkg:pull"`, r.srv.URL+"/token"))
		http.Error(w, "", http.StatusUnauthorized)
		return
	case !r.bearer && req.Header.Get("Authorization") != basic:
		w.Header().Set("WWW-Authenticate", `Basic realm="registry"`)
		http.Error(w, "", http.StatusUnauthorized)
		return
	}
	dgst := digest.FromBytes(r.manifest).String()
	switch {
	case req.URL.Path == "/v2/":
	case req.URL.Path == "/v2/pkg/manifests/"+dgst:
		w.Header().Set("Content-Type", ocispec.MediaTypeImageManifest)
		w.Header().Set("Docker-Content-Digest", dgst)
		w.Header().Set("Content-Length", strconv.Itoa(len(r.manifest)))
		if req.Method == http.MethodGet {
			write(r.t, w, r.manifest)
		}
	case strings.HasPrefix(req.URL.Path, "/v2/pkg/blobs/"):
		http.Redirect(w, req, r.storage+"/bucket/"+strings.TrimPrefix(req.URL.Path, "/v2/pkg/blobs/"), http.StatusTemporaryRedirect)
	default:
		http.NotFound(w, req)
	}
}

// objectStorage is the other origin. It records every request that carries credentials, and
// answers blob downloads with a challenge or with the blob.
type objectStorage struct {
	t         *testing.T
	blobs     map[string][]byte
	challenge string // "basic", "bearer" or "" to serve blobs to anyone
	srv       *httptest.Server

	mu    sync.Mutex
	leaks []string
}

func (s *objectStorage) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if a := req.Header.Get("Authorization"); a != "" {
		s.mu.Lock()
		s.leaks = append(s.leaks, req.Method+" "+req.URL.Path+" with "+a)
		s.mu.Unlock()
	}
	if req.URL.Path == "/token" {
		writeJSON(s.t, w, map[string]string{"token": "storage-token"})
		return
	}
	switch s.challenge {
	case "basic":
		w.Header().Set("WWW-Authenticate", `Basic realm="storage"`)
		http.Error(w, "", http.StatusUnauthorized)
		return
	case "bearer":
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm=%q,service="storage"`, s.srv.URL+"/token"))
		http.Error(w, "", http.StatusUnauthorized)
		return
	}
	data, ok := s.blobs[strings.TrimPrefix(req.URL.Path, "/bucket/")]
	if !ok {
		http.NotFound(w, req)
		return
	}
	write(s.t, w, data)
}

// write sends data as the response body.
func write(t *testing.T, w http.ResponseWriter, data []byte) {
	if _, err := w.Write(data); err != nil {
		t.Errorf("write response: %v", err)
	}
}

func writeJSON(t *testing.T, w http.ResponseWriter, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		t.Errorf("encode response: %v", err)
		return
	}
	write(t, w, data)
}

func (s *objectStorage) leaked() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leaks
}

// TestPullRedirectKeepsCredentials checks that credentials for a registry, and tokens fetched with
// them, never reach the origin a blob download is redirected to, even when that origin
// challenges the client; and that such redirects work when the other origin needs nothing.
func TestPullRedirectKeepsCredentials(t *testing.T) {
	t.Parallel()
	img, err := Build(testenv.PackageDir(t), BuildOptions{Version: "1.0.0"})
	require.NoError(t, err)
	var m ocispec.Manifest
	require.NoError(t, json.Unmarshal(img.manifest, &m))
	layer, err := content.FetchAll(t.Context(), img.store, m.Layers[0])
	require.NoError(t, err)

	for _, registryAuth := range []string{"basic", "bearer"} {
		// 127.0.0.1 on another port is the same host name to net/http, which then forwards the
		// Authorization header itself; localhost is another host name.
		for _, storageHost := range []string{"127.0.0.1", "localhost"} {
			for _, challenge := range []string{"basic", "bearer", ""} {
				name := fmt.Sprintf("%s registry, storage on %s, challenge %q", registryAuth, storageHost, challenge)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					storage := &objectStorage{t: t, blobs: map[string][]byte{m.Layers[0].Digest.String(): layer}, challenge: challenge}
					storage.srv = httptest.NewServer(storage)
					t.Cleanup(storage.srv.Close)
					reg := &redirectingRegistry{
						t:    t,
						user: "pkgsync", password: "s3cret", bearer: registryAuth == "bearer",
						manifest: img.manifest,
						storage:  strings.Replace(storage.srv.URL, "127.0.0.1", storageHost, 1),
					}
					reg.srv = httptest.NewServer(reg)
					t.Cleanup(reg.srv.Close)
					host := strings.TrimPrefix(reg.srv.URL, "http://")

					creds := dockerConfigCredentials(t, host, reg.user, reg.password)
					a, err := newClient(t, Options{}).Pull(t.Context(), mustRef(t, host+"/pkg@"+img.Digest), creds)
					if challenge == "" {
						require.NoError(t, err)
						assert.Equal(t, readTree(t, os.DirFS(testenv.PackageDir(t))), readTree(t, a.FS))
					} else {
						require.Error(t, err)
					}
					assert.Empty(t, storage.leaked())
				})
			}
		}
	}
}
