package testenv

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// RegistryEnv names the environment variable that points tests at a registry the user already
// runs (zot, for instance) instead of starting one: host:port, plain HTTP, no authentication; or
// "zot" (ZotRegistry), which starts bin/zot once for the test process.
const RegistryEnv = "PKGSYNC_TEST_REGISTRY"

// RegistryOptions selects the registry's security.
type RegistryOptions struct {
	// TLS serves HTTPS with a certificate for 127.0.0.1 and localhost, signed by a fresh CA.
	TLS bool
	// Htpasswd requires basic authentication with a generated user and password.
	Htpasswd bool
	// Own starts a Distribution registry for the test even when $PKGSYNC_TEST_REGISTRY is set:
	// for a test that needs the registry's own behaviour or the registry to itself.
	Own bool
	// NotifyURL, when set, is where the registry sends its notifications (notifications.endpoints),
	// with the header "Authorization: Bearer NotifyToken" when NotifyToken is set.
	NotifyURL, NotifyToken string
}

// Registry is a running OCI registry.
type Registry struct {
	// Host is host:port, for example 127.0.0.1:5000.
	Host string
	// CAFile is the PEM file of the CA that signed the serving certificate, when TLS.
	CAFile string
	// Username and Password are the credentials, when Htpasswd (SetPassword changes Password).
	Username, Password string
	// htpasswd is the file the registry reads the credentials from, when Htpasswd.
	htpasswd string

	proc *process
}

// StartRegistry starts a CNCF Distribution registry on a free loopback port, storing blobs and
// its logs under dir.
func StartRegistry(ctx context.Context, dir string, opts RegistryOptions) (*Registry, error) {
	bin, err := binary("registry")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create registry directory: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	r := &Registry{Host: fmt.Sprintf("127.0.0.1:%d", port)}

	var cfg strings.Builder
	fmt.Fprintf(&cfg, "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\n")
	fmt.Fprintf(&cfg, "storage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\n", filepath.Join(dir, "storage"))
	fmt.Fprintf(&cfg, "http:\n  addr: %s\n", r.Host)
	if opts.TLS {
		certs, err := writeServingCerts(dir)
		if err != nil {
			return nil, err
		}
		r.CAFile = certs.caFile
		fmt.Fprintf(&cfg, "  tls:\n    certificate: %s\n    key: %s\n", certs.certFile, certs.keyFile)
	}
	if opts.Htpasswd {
		r.Username, r.Password = "pkgsync", "s3cret-"+fmt.Sprint(port)
		hash, err := bcrypt.GenerateFromPassword([]byte(r.Password), bcrypt.MinCost)
		if err != nil {
			return nil, fmt.Errorf("hash registry password: %w", err)
		}
		r.htpasswd = filepath.Join(dir, "htpasswd")
		if err := os.WriteFile(r.htpasswd, []byte(r.Username+":"+string(hash)+"\n"), 0o600); err != nil {
			return nil, fmt.Errorf("write htpasswd: %w", err)
		}
		fmt.Fprintf(&cfg, "auth:\n  htpasswd:\n    realm: pkgsync-test\n    path: %s\n", r.htpasswd)
	}
	if opts.NotifyURL != "" {
		fmt.Fprintf(&cfg, "notifications:\n  endpoints:\n    - name: pkgsync\n      url: %s\n      timeout: 2s\n      threshold: 3\n      backoff: 100ms\n", opts.NotifyURL)
		if opts.NotifyToken != "" {
			fmt.Fprintf(&cfg, "      headers:\n        Authorization: [%q]\n", "Bearer "+opts.NotifyToken)
		}
	}
	configFile := filepath.Join(dir, "registry.yaml")
	if err := os.WriteFile(configFile, []byte(cfg.String()), 0o600); err != nil {
		return nil, fmt.Errorf("write registry config: %w", err)
	}
	// Its own process group, and killed with its parent, so a crashed test leaks no registry.
	if r.proc, err = startProcess("registry", filepath.Join(dir, "registry.log"), bin, "serve", configFile); err != nil {
		return nil, err
	}
	if err := r.waitReady(ctx); err != nil {
		_ = r.Stop()
		return nil, err
	}
	return r, nil
}

// SetPassword rotates the password of a registry started with Htpasswd: from the next request
// on, the registry accepts the new password and refuses the old one. Distribution reads its
// htpasswd file again when the file's modification time changes, so the new file is written
// aside, given a modification time the old one cannot have, and renamed over it.
func (r *Registry) SetPassword(password string) error {
	if r.htpasswd == "" {
		return errors.New("the registry was not started with Htpasswd")
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		return fmt.Errorf("hash registry password: %w", err)
	}
	old, err := os.Stat(r.htpasswd)
	if err != nil {
		return fmt.Errorf("read htpasswd: %w", err)
	}
	next := r.htpasswd + ".next"
	if err := os.WriteFile(next, []byte(r.Username+":"+string(hash)+"\n"), 0o600); err != nil {
		return fmt.Errorf("write htpasswd: %w", err)
	}
	modified := time.Now()
	if !modified.After(old.ModTime()) {
		modified = old.ModTime().Add(time.Second)
	}
	if err := os.Chtimes(next, modified, modified); err != nil {
		return fmt.Errorf("write htpasswd: %w", err)
	}
	if err := os.Rename(next, r.htpasswd); err != nil {
		return fmt.Errorf("write htpasswd: %w", err)
	}
	r.Password = password
	return nil
}

// NewRegistry starts a registry for a test and stops it when the test ends. With zero options
// and $PKGSYNC_TEST_REGISTRY set, it returns that registry instead: tests that use it name their
// repositories with Repository, and count only requests the OCI distribution spec promises.
func NewRegistry(t testing.TB, opts RegistryOptions) *Registry {
	t.Helper()
	if opts == (RegistryOptions{}) && UserRegistry() != "" {
		host, err := userRegistry()
		if err != nil {
			t.Fatalf("testenv: %s=%s: %v", RegistryEnv, UserRegistry(), err)
		}
		return &Registry{Host: host}
	}
	r, err := StartRegistry(context.Background(), t.TempDir(), opts)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() {
		if err := r.Stop(); err != nil {
			t.Errorf("testenv: %v", err)
		}
	})
	return r
}

// UserRegistry returns $PKGSYNC_TEST_REGISTRY: host:port of the registry the user points tests
// at, "zot" for a zot process of the test's own (UserRegistryHost resolves it), or "" when unset.
func UserRegistry() string { return os.Getenv(RegistryEnv) }

// UserRegistryHost returns host:port of the user's registry: $PKGSYNC_TEST_REGISTRY, or the zot
// process started for this test process when it says "zot". It fails the test when that zot
// cannot start.
func UserRegistryHost(t testing.TB) string {
	t.Helper()
	host, err := userRegistry()
	if err != nil {
		t.Fatalf("testenv: %s=%s: %v", RegistryEnv, UserRegistry(), err)
	}
	return host
}

func userRegistry() (string, error) {
	if v := UserRegistry(); v != ZotRegistry {
		return v, nil
	}
	return sharedZot()
}

// runID tells this test process's repositories from those of every other run against the same
// registry.
var runID = sync.OnceValue(func() string { return strings.ToLower(rand.Text()[:10]) })

// repositoryComponent is one path component of a repository name, as the OCI distribution spec
// defines it.
var repositoryComponent = regexp.MustCompile(`^[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*$`)

// Repository returns a repository name for name that is the test's own, in this run:
// pkgsync-test/RUN/TEST/name, RUN random per test process and TEST the test's name in the
// registry's alphabet. Tests sharing a registry ($PKGSYNC_TEST_REGISTRY), or run again against
// it, never see one another's tags, so a second run passes as the first did. The same test and
// name give the same repository; name is one or more path components ("app", "team-a/app").
func Repository(t testing.TB, name string) string {
	t.Helper()
	for _, c := range strings.Split(name, "/") {
		if !repositoryComponent.MatchString(c) {
			t.Fatalf("testenv: %q is not a repository name", name)
		}
	}
	test := strings.Trim(nonAlphanumeric.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(test) > maxTestComponent {
		test = strings.TrimRight(test[:maxTestComponent], "-")
	}
	return "pkgsync-test/" + runID() + "/" + test + "/" + name
}

// maxTestComponent bounds the test's part of a repository name: registries bound the whole
// name (Distribution at 255 bytes).
const maxTestComponent = 100

var nonAlphanumeric = regexp.MustCompile(`[^a-z0-9]+`)

// URL is the registry's base URL.
func (r *Registry) URL() string {
	if r.CAFile != "" {
		return "https://" + r.Host
	}
	return "http://" + r.Host
}

// waitReady polls the /v2/ endpoint until the registry answers (401 counts: it is up).
func (r *Registry) waitReady(ctx context.Context) error {
	client := &http.Client{Timeout: time.Second}
	if r.CAFile != "" {
		pem, err := os.ReadFile(r.CAFile)
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.URL()+"/v2/", nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized {
				return nil
			}
		}
		select {
		case <-r.proc.done:
			return fmt.Errorf("registry exited before it was ready; see %s", r.proc.log.Name())
		case <-ctx.Done():
			return fmt.Errorf("registry at %s not ready: %w (see %s)", r.Host, ctx.Err(), r.proc.log.Name())
		case <-tick.C:
		}
	}
}

// Stop kills the registry process and waits for it to exit.
func (r *Registry) Stop() error {
	if err := r.proc.kill(); err != nil {
		return fmt.Errorf("stop registry: %w", err)
	}
	return nil
}

// freePort asks the kernel for a free loopback port. The port is released before the registry
// binds it; on a test machine the window for a clash is negligible.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
