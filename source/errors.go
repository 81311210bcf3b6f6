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

// Causes explain names, for callers to match with errors.Is and add a hint of their own: the
// CLI names its flags, the controller its fields and flags. source names neither.
var (
	// ErrAuthenticationRequired: the registry wants credentials, or refused the ones given.
	ErrAuthenticationRequired = errors.New("authentication required")
	// ErrTLSVerification: the registry's certificate is not trusted.
	ErrTLSVerification = errors.New("TLS verification failed")
	// ErrHTTPSRequired: the registry refused a plain HTTP request; it probably serves HTTPS.
	ErrHTTPSRequired = errors.New("the registry refused plain HTTP")
	// ErrPlainHTTPAnswer: the registry answered an HTTPS request with plain HTTP.
	ErrPlainHTTPAnswer = errors.New("the registry answered HTTPS with plain HTTP")
)

// explain turns a registry or transport error into one that names the registry's answer, and
// marks the causes callers give hints for (ErrAuthenticationRequired and the others above). The
// original error stays in the chain.
func (c *Client) explain(ref Reference, err error) error {
	var resp *errcode.ErrorResponse
	hasResp := errors.As(err, &resp)
	switch {
	case errors.Is(err, auth.ErrBasicCredentialNotFound),
		hasResp && resp.StatusCode == http.StatusUnauthorized:
		return fmt.Errorf("%w for %s: %w", ErrAuthenticationRequired, ref.Registry, err)
	case hasResp && resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("access to %s denied: %w; the credentials lack pull or push rights", ref.Name(), err)
	case hasResp && resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("repository %s not found in %s: %w", ref.Repository, ref.Registry, err)
	case hasResp && resp.StatusCode == http.StatusBadRequest && c.plainHTTP(ref.Registry):
		return fmt.Errorf("%s: %w (it probably serves HTTPS): %w", ref.Registry, ErrHTTPSRequired, err)
	case errors.Is(err, errdef.ErrNotFound) && ref.Digest == "" && ref.Tag != "":
		return fmt.Errorf("tag %s not found in %s: %w", ref.Tag, ref.Name(), err)
	case errors.Is(err, errdef.ErrNotFound):
		return fmt.Errorf("%s not found in %s: %w", ref.Digest, ref.Name(), err)
	case isTLSVerifyError(err):
		return fmt.Errorf("%w for %s: %w; its certificate is not signed by a trusted CA", ErrTLSVerification, ref.Registry, err)
	case isHTTPAnswerToTLS(err):
		return fmt.Errorf("%s: %w: %w", ref.Registry, ErrPlainHTTPAnswer, err)
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
