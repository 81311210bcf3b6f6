package source

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/errcode"
)

// ErrLimit marks an image rejected because it exceeds a configured limit.
var ErrLimit = errors.New("limit exceeded")

// ErrUnsafeEntry marks a layer entry rejected by the unpacker: absolute or escaping paths,
// links, devices.
var ErrUnsafeEntry = errors.New("unsafe archive entry")

// explain turns a registry or transport error into one that names the registry's answer and
// what to do about it. The original error stays in the chain.
func (c *Client) explain(ref Reference, err error) error {
	var resp *errcode.ErrorResponse
	hasResp := errors.As(err, &resp)
	switch {
	case errors.Is(err, auth.ErrBasicCredentialNotFound),
		hasResp && resp.StatusCode == http.StatusUnauthorized:
		return fmt.Errorf("authentication required for %s: %w; log in with `docker login %s` "+
			"(or give the credentials in the pull secret)", ref.Registry, err, ref.Registry)
	case hasResp && resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("access to %s denied: %w; the credentials lack pull or push rights", ref.Name(), err)
	case hasResp && resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("repository %s not found in %s: %w", ref.Repository, ref.Registry, err)
	case hasResp && resp.StatusCode == http.StatusBadRequest && c.plainHTTP(ref.Registry):
		return fmt.Errorf("%s rejected a plain HTTP request: %w; the registry probably serves HTTPS: "+
			"give its CA with --ca-file (or a CA bundle), which switches to HTTPS", ref.Registry, err)
	case errors.Is(err, errdef.ErrNotFound) && ref.Digest == "" && ref.Tag != "":
		return fmt.Errorf("tag %s not found in %s: %w", ref.Tag, ref.Name(), err)
	case errors.Is(err, errdef.ErrNotFound):
		return fmt.Errorf("%s not found in %s: %w", ref.Digest, ref.Name(), err)
	case isTLSVerifyError(err):
		return fmt.Errorf("TLS verification of %s failed: %w; if the registry uses a private CA, "+
			"give it with --ca-file (or a CA bundle); --insecure-skip-tls-verify skips verification", ref.Registry, err)
	case isHTTPAnswerToTLS(err):
		return fmt.Errorf("%s answered HTTPS with plain HTTP: %w; use --plain-http for this registry", ref.Registry, err)
	}
	return err
}

func isTLSVerifyError(err error) bool {
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		verify   *tls.CertificateVerificationError
	)
	return errors.As(err, &unknown) || errors.As(err, &hostname) || errors.As(err, &invalid) || errors.As(err, &verify)
}

func isHTTPAnswerToTLS(err error) bool {
	var record tls.RecordHeaderError
	return errors.As(err, &record) || strings.Contains(err.Error(), "server gave HTTP response to HTTPS client")
}
