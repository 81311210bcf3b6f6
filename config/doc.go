// Package config embeds pkgsync's installation manifests (config/crd, config/rbac,
// config/manager, config/default) and renders them for `pkgsync install` and `make release`.
package config
