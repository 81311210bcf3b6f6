package source

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// What a registry's responses can cost. A registry answers every request, and may be run by
// whoever may name one in a Package. oras-go (v2.6.4) bounds most of what it reads itself:
//   - a manifest fetched by reference is read to the size its Content-Length declares, which
//     the callers check first (maxManifestBytes; source/signature's maxSignatureManifestBytes);
//     without a Docker-Content-Digest header it is read to compute the digest, up to
//     Repository.MaxMetadataBytes (4 MiB; remote/repository.go calculateDigestFromResponse);
//   - a page of a tag or referrers listing is decoded from at most MaxMetadataBytes
//     (remote/repository.go tags, referrersPageByAPI), and a next-page Link must stay on the
//     registry's origin (remote/utils.go parseLink); the number of pages is ours to bound
//     (TagListMaxPages, ReferrerListMaxPages), and the total is, by a readBudget;
//   - a token response from the auth realm is read up to 128 KiB (remote/auth/client.go
//     maxResponseBytes), an error body up to 8 KiB (remote/internal/errutil maxErrorBytes);
//   - redirects are followed 10 times at most, dropping credentials once they leave the origin
//     (remote/auth/client.go defaultMaxRedirects, sendRedirectSafe);
//   - retries of 429 and 5xx answers are 5 at most, at most 3 s apart (remote/retry
//     DefaultPolicy), their bodies closed unread.
//
// Blobs are read to the size their descriptor declares (content.NewVerifyReader), which pull
// checks against Limits first. What is left is the headers and the time, bounded here for the
// transport NewClient builds, and by each operation's deadline.
const (
	// maxResponseHeaderBytes bounds a response's headers (net/http's default is 10 MiB). A
	// registry's are a few KiB: a WWW-Authenticate challenge, a Link, a digest.
	maxResponseHeaderBytes = 256 << 10
	// responseHeaderTimeout bounds the wait for a response's headers once the request is
	// sent (net/http waits without end by default). A body that trickles is bounded by the
	// operation's deadline: a pull's (sharedPullTimeout), a resolution's or listing's
	// (sharedResolveTimeout), a verification's (source/signature's maxVerifyTime), and the
	// caller's.
	responseHeaderTimeout = time.Minute
)

// readBudget bounds the response bytes one operation reads from registries: each response body
// (one page of a listing, a token, an error), and all of them together. oras bounds each page
// it decodes (Repository.MaxMetadataBytes, 4 MiB by default), but a listing is as many pages
// as the registry links, so a registry run by whoever may create a Package could make one
// listing read without end. The budget travels in the request context, so that every request
// of the operation counts, whichever oras code sends it (token requests included).
type readBudget struct {
	// what names the operation in the error: "the tag listing".
	what        string
	perResponse int64
	total       int64
	used        atomic.Int64
}

type readBudgetKey struct{}

// withReadBudget returns ctx carrying b: the client's transport counts what each response of a
// request made with it delivers, and fails the read past a bound with an error wrapping
// ErrLimit.
func withReadBudget(ctx context.Context, b *readBudget) context.Context {
	return context.WithValue(ctx, readBudgetKey{}, b)
}

// budgetTransport applies the read budget of the request's context, if any, to the response.
type budgetTransport struct {
	next http.RoundTripper
}

func (t budgetTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if b, ok := req.Context().Value(readBudgetKey{}).(*readBudget); ok && resp.Body != nil {
		resp.Body = &budgetBody{rc: resp.Body, b: b}
	}
	return resp, nil
}

// budgetBody counts what it reads against a readBudget, and reads no more than one byte past
// either bound: like http.MaxBytesReader, it fails the read that goes past it.
type budgetBody struct {
	rc   io.ReadCloser
	b    *readBudget
	read int64
	err  error
}

func (r *budgetBody) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	left := max(0, min(r.b.perResponse-r.read, r.b.total-r.b.used.Load()))
	if int64(len(p)) > left+1 {
		p = p[:left+1]
	}
	n, err := r.rc.Read(p)
	r.read += int64(n)
	used := r.b.used.Add(int64(n))
	switch {
	case r.read > r.b.perResponse:
		r.err = fmt.Errorf("%w: %s read a response over %d bytes", ErrLimit, r.b.what, r.b.perResponse)
	case used > r.b.total:
		r.err = fmt.Errorf("%w: %s read more than %d bytes", ErrLimit, r.b.what, r.b.total)
	default:
		return n, err
	}
	return int(min(int64(n), left)), r.err
}

func (r *budgetBody) Close() error { return r.rc.Close() }
