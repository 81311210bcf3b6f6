package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// ZotRegistry is the value of $PKGSYNC_TEST_REGISTRY that starts zot (bin/zot, built by
// `make zot` from ../shared/zot) once for the test process, instead of naming a running registry.
const ZotRegistry = "zot"

// StartZot starts zot, the OCI registry the project's users run, on a free loopback port: plain
// HTTP, no authentication, storing blobs and its log under dir. It runs with the docker2s2
// compatibility switch, as zot's users run it for Docker images.
func StartZot(ctx context.Context, dir string) (*Registry, error) {
	bin, err := binary("zot")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create zot directory: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	r := &Registry{Host: fmt.Sprintf("127.0.0.1:%d", port)}
	config, err := json.Marshal(map[string]any{
		"distSpecVersion": "1.1.1",
		"storage":         map[string]any{"rootDirectory": filepath.Join(dir, "storage")},
		"http":            map[string]any{"address": "127.0.0.1", "port": fmt.Sprint(port), "compat": []string{"docker2s2"}},
		"log":             map[string]any{"level": "error"},
	})
	if err != nil {
		return nil, fmt.Errorf("write zot config: %w", err)
	}
	configFile := filepath.Join(dir, "zot.json")
	if err := os.WriteFile(configFile, config, 0o600); err != nil {
		return nil, fmt.Errorf("write zot config: %w", err)
	}
	// Its own process group, and killed with its parent, so a crashed test leaks no registry.
	if r.proc, err = startProcess("zot", filepath.Join(dir, "zot.log"), bin, "serve", configFile); err != nil {
		return nil, err
	}
	if err := r.waitReady(ctx); err != nil {
		_ = r.Stop()
		return nil, fmt.Errorf("zot: %w (its log: %s)", err, r.proc.log.Name())
	}
	return r, nil
}

// sharedZot is the zot process of this test process when $PKGSYNC_TEST_REGISTRY is "zot". It
// lives as long as the process (zot is killed with it); its storage is under $TMPDIR, which
// `make test-zot` removes after the run.
var sharedZot = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "pkgsync-zot-")
	if err != nil {
		return "", fmt.Errorf("create zot directory: %w", err)
	}
	r, err := StartZot(context.Background(), dir)
	if err != nil {
		return "", err
	}
	return r.Host, nil
})
