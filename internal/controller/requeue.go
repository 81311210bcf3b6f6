package controller

import (
	"time"

	"github.com/fluxcd/pkg/runtime/jitter"
)

// jittered adds the interval jitter.
func jittered(d time.Duration) time.Duration { return jitter.JitteredIntervalDuration(d) }
