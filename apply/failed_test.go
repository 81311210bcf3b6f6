package apply_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// setDeploymentPastDeadline plays the Deployment controller giving up on a rollout: past its
// progressDeadlineSeconds, Progressing=False with reason ProgressDeadlineExceeded.
func setDeploymentPastDeadline(t *testing.T, c client.Client, ns, name string) {
	t.Helper()
	writeDeploymentStatus(t, c, ns, name, func(_ int64, now string) (int64, []any) {
		return 0, []any{
			map[string]any{"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable", "lastTransitionTime": now},
			map[string]any{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
				"message": `ReplicaSet "web-1" has timed out progressing.`, "lastTransitionTime": now},
		}
	})
}

// TestFailedObjectIsReported (issue 42): a Deployment past its progress deadline is kstatus
// Failed: the pass says so (Result.Failed) instead of reporting it as progress, and a
// Deployment that recovers is available again.
func TestFailedObjectIsReported(t *testing.T) {
	t.Parallel()
	e := newProgressEnv(t, 0)
	res, _, err := e.pass(t.Context())
	require.NoError(t, err)
	require.Equal(t, "deploy", res.Progressing().Name)
	assert.Empty(t, res.Failed(), "a Deployment without status yet is in progress, not failed")

	setDeploymentPastDeadline(t, e.mgmt, e.ns, "web")
	res, _, err = e.pass(t.Context())
	require.NoError(t, err)
	require.False(t, res.Complete())
	failed := res.Failed()
	require.Len(t, failed, 1)
	assert.Equal(t, "web", failed[0].Ref.Name)
	assert.Contains(t, failed[0].Reason, "kstatus Failed")
	assert.Contains(t, failed[0].Reason, "Progress deadline exceeded")
	assert.Contains(t, failed[0].Reason, `Progressing=False ProgressDeadlineExceeded: ReplicaSet "web-1" has timed out progressing.`,
		"the Deployment's own reason and message")

	setDeploymentAvailable(t, e.mgmt, e.ns, "web")
	res, _, err = e.pass(t.Context())
	require.NoError(t, err)
	assert.Empty(t, res.Failed())
	assert.True(t, res.Complete(), res.Summary())
}

// TestFailedObjectConditionsQuotedBounded: the conditions a failure reason quotes are written by
// whoever writes the object's status (on a hosted cluster, its administrators): each reason and
// message is cut to its bound on a character boundary, never inside one, and control characters
// (a terminal's escape sequences, line breaks that would forge lines of `kubectl describe`) and
// marks that reorder text are replaced.
func TestFailedObjectConditionsQuotedBounded(t *testing.T) {
	t.Parallel()
	e := newProgressEnv(t, 0)
	_, _, err := e.pass(t.Context())
	require.NoError(t, err)
	// 255 bytes then a two-byte character: a cut at 256 bytes falls inside it.
	message := strings.Repeat("m", 255) + "é" + strings.Repeat("m", 1000)
	writeDeploymentStatus(t, e.mgmt, e.ns, "web", func(_ int64, now string) (int64, []any) {
		return 0, []any{
			map[string]any{"type": "Available", "status": "False", "reason": strings.Repeat("R", 64<<10), "lastTransitionTime": now},
			map[string]any{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded", "message": message, "lastTransitionTime": now},
			map[string]any{"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate",
				"message": "\x1b[2J\x1b[31mforged\nLine: \u202eok\tthere", "lastTransitionTime": now},
		}
	})
	res, _, err := e.pass(t.Context())
	require.NoError(t, err)
	failed := res.Failed()
	require.Len(t, failed, 1)
	reason := failed[0].Reason
	assert.True(t, utf8.ValidString(reason), "valid UTF-8")
	assert.Less(t, len(reason), 1024, "bounded: %d bytes", len(reason))
	assert.Contains(t, reason, "Available=False RRRR")
	assert.Contains(t, reason, "Progressing=False ProgressDeadlineExceeded: "+strings.Repeat("m", 255)+"…")
	assert.Contains(t, reason, "ReplicaFailure=True FailedCreate: ")
	assert.Contains(t, reason, "forged Line: ")
	for _, c := range []string{"\x1b", "\n", "\t", "\u202e"} {
		assert.NotContains(t, reason, c)
	}
}
