package reconciler

import (
	"time"

	"github.com/fluxcd/pkg/runtime/jitter"
)

// Jittered adds the interval jitter.
func Jittered(d time.Duration) time.Duration { return jitter.JitteredIntervalDuration(d) }

// MaxDependentTeardownWait bounds how long a dependency being deleted (a Package, a
// ClusterPackage, a fleet's member) waits for what depends on it to be torn down first. A
// dependent's teardown can hang (an object whose finalizer is never removed, a hosted cluster
// that stays away until --hosted-teardown-timeout), and one who owns the dependent must not
// hold up the dependency's teardown for longer than this.
const MaxDependentTeardownWait = 10 * time.Minute
