package image

import (
	"bytes"
	"encoding/pem"
	"time"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// NonRootUID is the user (and group) the controller runs as: distroless' "nonroot".
const NonRootUID = 65532

// Paths inside the image.
const (
	BinaryPath   = "/pkgsync"
	CABundlePath = "/etc/ssl/certs/ca-certificates.crt"
)

// passwd and group hold root and the non-root user, for tools and libraries that look the
// user up; neither has a shell.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group = "root:x:0:\n" +
		"nonroot:x:65532:\n"
	// nsswitch.conf makes Go's resolver consult /etc/hosts before DNS, as glibc would.
	nsswitch = "hosts: files dns\n"
)

// CABundle returns the PEM bundle of the Mozilla (NSS) root certificates that
// golang.org/x/crypto/x509roots/fallback embeds, at the version go.mod pins: the same input on
// every machine, unlike the build host's /etc/ssl. Roots that NSS trusts only with a constraint
// a PEM file cannot express (a distrust-after date) are left out rather than trusted without it.
func CABundle() []byte {
	var buf bytes.Buffer
	for root := range bundle.Roots() {
		if root.Constraint != nil {
			continue
		}
		// Encoding to a bytes.Buffer does not fail.
		_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: root.Certificate})
	}
	return buf.Bytes()
}

// baseFiles is the base layer: what a distroless "static" image holds that a static Go binary
// uses. Its timestamps are the Unix epoch, so the layer is the same blob in every release that
// has the same certificates, and registries store it once.
func baseFiles() []file {
	epoch := time.Unix(0, 0)
	return []file{
		{name: "etc/", mode: 0o755, modTime: epoch},
		{name: "etc/group", mode: 0o644, modTime: epoch, data: []byte(group)},
		{name: "etc/nsswitch.conf", mode: 0o644, modTime: epoch, data: []byte(nsswitch)},
		{name: "etc/passwd", mode: 0o644, modTime: epoch, data: []byte(passwd)},
		{name: "etc/ssl/", mode: 0o755, modTime: epoch},
		{name: "etc/ssl/certs/", mode: 0o755, modTime: epoch},
		{name: CABundlePath[1:], mode: 0o644, modTime: epoch, data: CABundle()},
		{name: "home/", mode: 0o755, modTime: epoch},
		{name: "home/nonroot/", mode: 0o700, modTime: epoch, uid: NonRootUID},
		{name: "tmp/", mode: 0o1777, modTime: epoch},
	}
}
