package source

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
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
