package receiver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeCert writes a self-signed certificate for 127.0.0.1 as tls.crt and tls.key in dir.
func writeCert(t *testing.T, dir string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "pkgsync-webhook"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return cert
}

// TestServerTLS: with CertDir the receiver speaks HTTPS with the certificate found there, and
// nothing in plain HTTP.
func TestServerTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cert := writeCert(t, dir)
	m, err := NewMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	addrs := make(chan net.Addr, 1)
	srv := &Server{Addr: "127.0.0.1:0", CertDir: dir, Listening: func(a net.Addr) { addrs <- a },
		Handler: New(Options{Keys: staticKeys{}, Waker: &recordingWaker{}, Metrics: m})}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() { cancel(); assert.NoError(t, <-done) })
	var addr net.Addr
	select {
	case addr = <-addrs:
	case err := <-done:
		require.NoError(t, err)
	}

	pool := x509.NewCertPool()
	pool.AddCert(cert)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	resp, err := client.Post("https://"+addr.String()+"/hooks/generic", "application/json", strings.NewReader(`{"repository":"team/app"}`))
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "served over TLS; no key, so refused")

	resp, err = (&http.Client{Timeout: 10 * time.Second}).Post("http://"+addr.String()+"/hooks/generic", "application/json", strings.NewReader(`{}`))
	if err == nil {
		require.NoError(t, resp.Body.Close())
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "plain HTTP gets Go's TLS answer to HTTP, never the receiver")
	}
}
