package reconciler

import (
	"time"

	"github.com/fluxcd/pkg/runtime/jitter"
)

// Jittered adds the interval jitter.
func Jittered(d time.Duration) time.Duration { return jitter.JitteredIntervalDuration(d) }
