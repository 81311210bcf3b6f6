package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// BinDir returns the directory holding kube-apiserver, etcd and registry: $KUBEBUILDER_ASSETS when
// set, otherwise the repository's bin/ directory (built by `make tools`).
func BinDir() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "bin"), nil
}

// binary returns the path of a tool binary and a hint to build it when it is missing.
func binary(name string) (string, error) {
	dir, err := BinDir()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("%s not found in %s: run `make tools` (or set KUBEBUILDER_ASSETS): %w", name, dir, err)
	}
	return path, nil
}

// repoRoot walks up from the working directory to the directory of pkgsync's go.mod; tests run
// in their package directory, the demo from the repository root.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(data), "module pkgsync.dev/pkgsync\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find the pkgsync repository root (go.mod) above the working directory")
		}
		dir = parent
	}
}
