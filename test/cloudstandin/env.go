package cloudstandin

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Env is what every test of the stand-ins starts with: a CA (its PEM in CAFile, for --ca-file)
// and the proxy the clouds' host names are reached through, stopped when the test ends.
type Env struct {
	CA     *CA
	CAFile string
	Proxy  *Proxy
}

// NewEnv makes an Env for t.
func NewEnv(t testing.TB) *Env {
	t.Helper()
	ca, err := NewCA()
	require.NoError(t, err)
	caFile, err := ca.WriteFile(t.TempDir())
	require.NoError(t, err)
	proxy := NewProxy()
	t.Cleanup(proxy.Close)
	return &Env{CA: ca, CAFile: caFile, Proxy: proxy}
}

// AWS starts the AWS stand-ins, in front of upstream, stopped when the test ends.
func (e *Env) AWS(t testing.TB, upstream string, verify VerifyToken) *AWS {
	t.Helper()
	a, err := NewAWS(e.CA, e.Proxy, upstream, verify)
	require.NoError(t, err)
	t.Cleanup(a.Close)
	return a
}

// Azure starts the Azure stand-ins, in front of upstream, stopped when the test ends.
func (e *Env) Azure(t testing.TB, upstream string, verify VerifyToken) *Azure {
	t.Helper()
	a, err := NewAzure(e.CA, e.Proxy, upstream, verify)
	require.NoError(t, err)
	t.Cleanup(a.Close)
	return a
}

// GCP starts the GCP stand-ins, in front of upstream, stopped when the test ends.
func (e *Env) GCP(t testing.TB, upstream string, verify VerifyToken, controller string) *GCP {
	t.Helper()
	g, err := NewGCP(e.CA, e.Proxy, upstream, verify, controller)
	require.NoError(t, err)
	t.Cleanup(g.Close)
	return g
}
