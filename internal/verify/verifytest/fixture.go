package verifytest

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"oras.land/oras-go/v2/registry/remote/auth"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/source"
	"pkgsync.dev/pkgsync/source/signature"
)

const (
	TenantNamespace     = "team"
	ControllerNamespace = "pkgsync-system"
)

// Registry is an in-process OCI registry (go-containerregistry's) that asks every request
// for basic credentials and serves only the user "reader". It counts the requests for
// signatures (the .sig tag cosign signs under, which only a verification that is not cached
// reads) and all requests.
type Registry struct {
	Host                  string
	Requests, SigRequests atomic.Int64
}

func NewRegistry(t *testing.T) *Registry {
	t.Helper()
	reg := &Registry{}
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reg.Requests.Add(1)
		if strings.Contains(r.URL.Path, ".sig") {
			reg.SigRequests.Add(1)
		}
		if user, _, ok := r.BasicAuth(); !ok || user != "reader" {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	reg.Host = strings.TrimPrefix(srv.URL, "http://")
	return reg
}

// UserCredentials logs in as user wherever it goes.
func UserCredentials(user string) source.Credentials {
	return func(context.Context, string) (auth.Credential, error) {
		return auth.Credential{Username: user, Password: "secret"}, nil
	}
}

// pushSigned pushes a package to repo:v1 and signs it with key (nil: unsigned); it returns the
// reference pinned to the digest.
func pushSigned(t *testing.T, src *source.Client, host, repo, content string, key *signature.SigningKey) source.Reference {
	t.Helper()
	img := BuildPackage(t, content)
	ref, err := source.ParseReference(host + "/" + repo + ":v1")
	require.NoError(t, err)
	_, err = src.Push(t.Context(), img, []source.Reference{ref}, UserCredentials("reader"))
	require.NoError(t, err)
	if key != nil {
		_, err = signature.Sign(t.Context(), src, ref, key, UserCredentials("reader"))
		require.NoError(t, err)
	}
	return ref.WithDigest(img.Digest)
}

// BuildPackage builds a package of one ConfigMap named content.
func BuildPackage(t *testing.T, content string) *source.Image {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte("apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata:\n  name: addon\nspec:\n  phases:\n  - name: config\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: "+content+"\n  annotations:\n    pkgsync.dev/phase: config\n"), 0o644))
	img, err := source.Build(dir, source.BuildOptions{})
	require.NoError(t, err)
	return img
}

func newKeyPair(t *testing.T) (*signature.SigningKey, []byte) {
	t.Helper()
	private, public, err := signature.GenerateSigningKey([]byte("pw"))
	require.NoError(t, err)
	key, err := signature.LoadSigningKey(private, []byte("pw"))
	require.NoError(t, err)
	return key, public
}

// Fixture is a registry with a package signed by key A and an unsigned one, Secrets of
// the keys in the tenant's and in the controller's namespace, and the source client.
type Fixture struct {
	Reg              *Registry
	Src              *source.Client
	Signed, Unsigned source.Reference
	Objects          []client.Object
}

func NewFixture(t *testing.T) *Fixture {
	t.Helper()
	reg := NewRegistry(t)
	src, err := source.NewClient(source.Options{PlainHTTPHosts: []string{reg.Host}})
	require.NoError(t, err)
	keyA, pubA := newKeyPair(t)
	_, pubB := newKeyPair(t)
	f := &Fixture{Reg: reg, Src: src,
		Signed:   pushSigned(t, src, reg.Host, "addons/signed", "signed", keyA),
		Unsigned: pushSigned(t, src, reg.Host, "addons/unsigned", "unsigned", nil),
	}
	for _, ns := range []string{TenantNamespace, ControllerNamespace} {
		f.Objects = append(f.Objects,
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keys-a"}, Data: map[string][]byte{"a.pub": pubA}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keys-b"}, Data: map[string][]byte{"b.pub": pubB}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-keys"}, Data: map[string][]byte{"README": []byte("x")}},
		)
	}
	return f
}

// Copies are copies of objs, for a fake client of their own: building one writes to them.
func Copies(objs []client.Object) []client.Object {
	out := make([]client.Object, len(objs))
	for i, o := range objs {
		out[i] = o.DeepCopyObject().(client.Object)
	}
	return out
}

// KeysOf is a spec.verify naming the key Secret secret.
func KeysOf(secret string) *v1alpha1.Verification {
	return &v1alpha1.Verification{SecretRef: meta.LocalObjectReference{Name: secret}}
}
