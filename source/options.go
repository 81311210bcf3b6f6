package source

import (
	"net/http"
	"time"
)

// Options configure a Client. The zero value works: system CA roots, anonymous access, default
// limits, a 64 MiB memory cache and no cache directory.
type Options struct {
	// CABundle holds PEM certificates trusted in addition to the system roots.
	CABundle []byte
	// InsecureSkipTLSVerify accepts any server certificate. For tests and emergencies only.
	InsecureSkipTLSVerify bool
	// PlainHTTPHosts lists registries (host or host:port) reached over plain HTTP. Loopback
	// registries use plain HTTP without being listed, as docker, crane and oras do, unless
	// CABundle or InsecureSkipTLSVerify asks for TLS, or RefuseLocalAddresses is set.
	PlainHTTPHosts []string
	// RefuseLocalAddresses is for a client whose references someone else writes (the
	// controller: a tenant's Package names the registry). It refuses what would let such a
	// reference reach the client's own machine: plain HTTP to a registry not in
	// PlainHTTPHosts (loopback registries included), a redirect from HTTPS to plain HTTP or to
	// a plain HTTP host not in PlainHTTPHosts, and connections to loopback, link-local and
	// unspecified addresses (127.0.0.0/8, ::1, 169.254.0.0/16, fe80::/10, 0.0.0.0, ::), cloud
	// metadata addresses (fd00:ec2::254, fd20:ce::254, 100.100.100.200), the addresses of this
	// machine's interfaces (read once, by NewClient), and NAT64 addresses (64:ff9b::/96) that
	// embed any of these, other than to the hosts of PlainHTTPHosts and LocalHosts. The
	// address is checked as it is dialled, after name resolution, so that a name resolving
	// there, a redirect (of a blob download, say) and a token realm are refused too. Refusals
	// wrap ErrLocalAddress. A host listed as host:port is allowed that port only; as host, any
	// port. With an HTTP proxy (HTTPS_PROXY, read by NewClient) the address dialled is the
	// proxy's, which is allowed wherever it is; a registry named by an IP address is checked
	// before it is handed to the proxy, one named by a host name is resolved by the proxy, on
	// its own rules (proxy.go). The zero value refuses nothing: docker's and oras' behaviour on
	// a developer's machine.
	RefuseLocalAddresses bool
	// LocalHosts lists registries (host or host:port) reached over HTTPS that may be on
	// local addresses when RefuseLocalAddresses is set.
	LocalHosts []string
	// Transport is the base HTTP transport. Nil builds one from the TLS options above; a caller
	// that sets it (a test counting requests, say) owns its TLS configuration, its time and
	// header bounds, and the addresses it dials: RefuseLocalAddresses is enforced when dialling,
	// by the transport built here, so NewClient refuses a Transport with RefuseLocalAddresses.
	Transport http.RoundTripper
	// UserAgent is sent with every request; empty means "pkgsync". Callers add their version.
	UserAgent string

	// Overrides rewrite every reference read (pulls, resolutions, tag listings, signatures)
	// before a registry is asked: Package Operator's --registry-host-overrides and
	// --image-prefix-overrides. Writes (Push, source/signature's Sign) go where the reference
	// names.
	Overrides Overrides
	// MirrorSets are the mirrors the client starts with; SetMirrorSets replaces them.
	MirrorSets MirrorSets

	// Credentials answer for registries when a call passes no credentials of its own. Nil
	// means anonymous access.
	Credentials Credentials

	// Limits bound what a pull accepts and what a build produces.
	Limits Limits

	// CacheBytes bounds the in-memory cache of unpacked artifacts, keyed by registry,
	// repository and digest. Zero means 64 MiB; a negative value turns the memory cache off.
	CacheBytes int64
	// PullBytes bounds, for the client (one per process), the bytes of files that pulls in
	// flight hold unpacked. A pull counts each file before reading it, gives its bytes back
	// when it ends (its artifact then stays in the memory cache, which CacheBytes bounds, or
	// with its callers), and waits for the budget, as long as its context allows, when other
	// pulls hold it. Zero means 128 MiB, or Limits.MaxUncompressedBytes if larger; a negative
	// value sets no bound. A value below Limits.MaxUncompressedBytes is refused by NewClient.
	PullBytes int64
	// CacheDir, when set, keeps verified blobs on disk, one directory per registry and
	// repository (repositories/SHA256(REGISTRY/REPOSITORY)/blobs/ALG/HEX), so a restart does not
	// download them again. It is not pruned; give it its own volume.
	CacheDir string
	// AccessTTL is how long the registry's word that a credential may read a digest in a
	// repository is trusted. Cached content (memory or CacheDir) is served to a caller only
	// with such a proof for the caller's own credential: a tag resolution that returned the
	// digest, or one HEAD request for the manifest. Zero means 5 minutes; a negative value
	// asks the registry on every pull. Revoked access keeps reading cached content for up to
	// this long.
	AccessTTL time.Duration

	// Progress, when set, is called as blob bytes move (push and pull). It is called from the
	// goroutines doing the transfer.
	Progress func(Progress)
}

// Progress says how far the transfer of one blob is.
type Progress struct {
	// Digest and Size describe the blob.
	Digest string
	Size   int64
	// Done is the number of bytes moved so far; Done == Size at the end.
	Done int64
}

// Limits bound an image. Zero fields take the defaults of DefaultLimits.
type Limits struct {
	// MaxCompressedBytes bounds the sum of the layer sizes as stored in the registry.
	MaxCompressedBytes int64
	// MaxUncompressedBytes bounds the sum of the file sizes in the package.
	MaxUncompressedBytes int64
	// MaxFiles bounds the number of entries (files and directories).
	MaxFiles int
	// MaxPathLength bounds the length in bytes of one path inside the package.
	MaxPathLength int
}

// DefaultLimits fit packages of Kubernetes manifests with ample headroom: 32 MiB compressed,
// 128 MiB uncompressed, 10000 entries, 1024-byte paths.
func DefaultLimits() Limits {
	return Limits{
		MaxCompressedBytes:   32 << 20,
		MaxUncompressedBytes: 128 << 20,
		MaxFiles:             10000,
		MaxPathLength:        1024,
	}
}

// withDefaults fills the zero fields from DefaultLimits.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxCompressedBytes <= 0 {
		l.MaxCompressedBytes = d.MaxCompressedBytes
	}
	if l.MaxUncompressedBytes <= 0 {
		l.MaxUncompressedBytes = d.MaxUncompressedBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = d.MaxFiles
	}
	if l.MaxPathLength <= 0 {
		l.MaxPathLength = d.MaxPathLength
	}
	return l
}
