// Package source moves package images between directories, OCI layout archives and registries,
// and turns a pulled image into a verified, size-limited file tree (an fs.FS). Signing images
// and verifying their signatures and attestations is source/signature's job, on top of this
// package's exported API (repository.go holds what it needs of the client); source never
// imports it.
//
// Libraries: oras-go v2 does the registry work (HTTP API, authentication and token caching,
// Docker config credentials and helpers, the one-HEAD tag resolution, graph copies for push)
// and reads OCI layout archives. go-containerregistry is used only by the tests, to build
// Package Operator images with an independent implementation. What neither does is written
// here: the reproducible tar+gzip layer, the safe unpacker with limits, the caches (per
// repository and digest, served only to credentials the registry vouched for) and the
// deterministic OCI layout archive.
package source
