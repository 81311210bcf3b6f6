// Package signature signs package images and verifies their signatures and attestations as
// cosign does, in the registry beside the image: with a key (the sha256-<digest>.sig tag of
// cosign 2, and sigstore bundles among the image's referrers, cosign 3's format), keylessly (a
// Fulcio certificate for an OIDC identity and a Rekor entry, checked offline against a trusted
// root), and in-toto attestations (the .att tag). Everything that verifies reads what whoever
// can push wrote, so every read is bounded here.
//
// It is built on source, and source never imports it: the registry work (credentials,
// overrides and the caller's mirrors, the transport's bounds, error mapping) is the
// source.Client's, through its exported API (Client.Repository, Client.LocateRepository,
// Client.Explain, PushBlob, FetchManifest, ListReferrers). A *source.Client is the first
// argument after the context of every function that talks to a registry; a caller's view of it
// (source.Client.WithCallerMirrors) reads the signatures through the caller's own mirrors.
//
// Libraries: sigstore-go verifies bundles and makes keyless ones (Fulcio, Rekor), sigstore's
// signature package signs and verifies with keys and DSSE, go-securesystemslib decrypts
// cosign's private keys.
package signature
