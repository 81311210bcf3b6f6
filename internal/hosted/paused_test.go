package hosted

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestPausedAt: spec.pausedUntil pauses a cluster as HyperShift reads it, whether or not its
// operator has written ReconciliationActive=False yet.
func TestPausedAt(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	later := now.Add(time.Hour)
	for _, tt := range []struct {
		name        string
		condition   bool
		pausedUntil string
		paused      bool
		until       time.Time
	}{
		{"neither", false, "", false, time.Time{}},
		{"the condition alone", true, "", true, time.Time{}},
		{"true", false, "true", true, time.Time{}},
		{"a time to come", false, later.Format(time.RFC3339), true, later},
		{"a time to come, the condition written too", true, later.Format(time.RFC3339), true, time.Time{}},
		{"a past time", false, now.Add(-time.Minute).Format(time.RFC3339), false, time.Time{}},
		{"now", false, now.Format(time.RFC3339), false, time.Time{}},
		{"not a time", false, "tomorrow", false, time.Time{}},
		{"True, as strconv.ParseBool reads it", false, "True", true, time.Time{}},
		{"1", false, "1", true, time.Time{}},
		{"false", false, "false", false, time.Time{}},
		{"false, the condition not yet cleared", true, "false", true, time.Time{}},
		{"a past time, the condition not yet cleared", true, now.Add(-time.Minute).Format(time.RFC3339), true, time.Time{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			hc := &HostedCluster{Paused: tt.condition, PausedUntil: tt.pausedUntil}
			paused, until := hc.PausedAt(now)
			assert.Equal(t, tt.paused, paused)
			assert.True(t, tt.until.Equal(until), "until %v, want %v", until, tt.until)
		})
	}
}
