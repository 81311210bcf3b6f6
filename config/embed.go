package config

import (
	"embed"
	"io/fs"
)

// files are the manifests `kubectl apply -k config/default` (and config/lockdown) reads,
// embedded so that a pkgsync binary installs the CRDs, RBAC and controller of its own release.
// The generated files (crd/bases, rbac/role.yaml) are embedded as `make generate` writes them.
//
//go:embed crd/*.yaml crd/bases/*.yaml
//go:embed rbac/*.yaml
//go:embed manager/*.yaml
//go:embed default/*.yaml
//go:embed lockdown/*.yaml
var files embed.FS

// Manifests returns the embedded file tree, rooted at config/.
func Manifests() fs.FS { return files }
