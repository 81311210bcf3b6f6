package e2e

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/hosted"
)

// TestSettledPassClosesItsHostedConnection: once a resource's pass settles, with its next pass
// an interval (10 min) away, its hosted cluster's connection is closed at once, not after the
// idle-connection timeout (15 s): a thousand hosted clusters would otherwise each hold an
// HTTP/2 connection and its TLS state for that long after every interval's pass. The hosted API
// server is reached through a relay that counts the connections it forwards.
func TestSettledPassClosesItsHostedConnection(t *testing.T) {
	t.Parallel()
	relay := newBlackHole(t, hostOf(t, suite.hosted.Config))
	relay.forward.Store(true)
	od := deadDeployment(t, "settled", relay.server(), nil)
	waitForReady(t, od, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	require.Positive(t, relay.accepted.Load(), "the hosted objects went through the relay")
	// Within half the idle timeout: only the settled pass's release closes the connection so soon.
	eventuallyFor(t, t.Context(), hosted.DefaultIdleConnTimeout/2, func(a *attempt) {
		assert.Zero(a, relay.open.Load(), "connections to the hosted API server still open after the settled pass")
	})
}
