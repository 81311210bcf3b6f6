package cloudauth

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A token endpoint that answers too much, or too slowly, fails the exchange (named) instead of
// holding the controller's memory or worker.
func TestExchangeBounds(t *testing.T) {
	release := make(chan struct{})
	big := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/xml")
		_, _ = w.Write([]byte("<AssumeRoleWithWebIdentityResponse>" + strings.Repeat("x", 4<<20)))
	}))
	t.Cleanup(big.Close)
	slow := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		select {
		case <-release:
		case <-time.After(time.Minute):
		}
	}))
	t.Cleanup(slow.Close)
	// Before the servers close (cleanups run last first): Close waits for the slow handler.
	t.Cleanup(func() { close(release) })
	for _, tt := range []struct {
		name, want string
		srv        *httptest.Server
	}{
		{"too large", "larger than 262144 bytes", big},
		{"too slow", "deadline exceeded", slow},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newAWSEnv(t)
			t.Setenv("AWS_ENDPOINT_URL_STS", tt.srv.URL)
			ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tt.srv.Certificate().Raw})
			ex, err := New(Options{ServiceAccounts: e.accounts, CABundle: ca, Timeout: 2 * time.Second})
			require.NoError(t, err)
			e.ex = ex
			start := time.Now()
			_, _, err = e.credential(t, Identity{Namespace: "a", ServiceAccount: "puller"})
			var xerr *Error
			require.ErrorAs(t, err, &xerr)
			assert.Equal(t, StepRoleAssumption, xerr.Step)
			assert.Contains(t, err.Error(), tt.want)
			assert.Less(t, time.Since(start), 20*time.Second)
		})
	}
}
