package applier

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/utils/clock"

	"pkgsync.dev/pkgsync/apply"
)

// progressTTL drops what the passes of a resource learnt when it has made no pass for this
// long: it was deleted, or moved to another controller, before it converged.
const progressTTL = 30 * time.Minute

// progressByOwner keeps, per resource, what its passes learnt of its objects (apply.Progress),
// so that the passes that wait on a later object neither read again the objects found
// available nor read before creating the objects recorded and not sent yet. It is memory only:
// a restarted controller reads every object once more. Each pass renews its resource's entry
// for progressTTL. A resource is reconciled by one worker at a time, so the read and the write
// of its entry in get do not race. The zero value remembers nothing.
type progressByOwner struct {
	owners *cache.Expiring // types.UID → *ownerProgress
}

func newProgressByOwner(c clock.Clock) progressByOwner {
	return progressByOwner{owners: cache.NewExpiringWithClock(c)}
}

type ownerProgress struct {
	// cluster names the HostedCluster behind the resource's namespace when the memory was
	// made: another one starts afresh.
	cluster  string
	progress *apply.Progress
	// waiting is the phase the last pass waited on, and quickUntil when its quick checks end
	// (zero: it got none); windows counts the waits given quick checks since the memory was
	// made.
	waiting    string
	quickUntil time.Time
	windows    int
}

// quickCheck is how often a phase that has waited less than quickChecksFor is looked at.
const (
	quickCheck     = time.Second
	quickChecksFor = 10 * time.Second
)

// nextCheck says how soon a pass of the resource uid that waits on phase, one of the pass's
// phases, is looked at again: every quickCheck for the first quickChecksFor of the phase's
// wait, then every interval. Most objects are available within seconds of their apply (a
// Deployment's pods on a healthy cluster): Ready follows them within a second, where a fixed
// interval would wait up to all of it. Each check reads only the objects still waited on
// (apply.Progress), so a wait costs at most quickChecksFor/quickCheck such reads more than with
// the interval alone.
//
// Until the resource converges (done), at most as many waits as the pass has phases get quick
// checks: the wait can go back to an earlier phase (an object of it that becomes unavailable
// again is seen when it is read again, after a failed pass or apply.Progress's maxAge), and
// whoever runs the object decides when. Were each change of phase a new wait, an object made
// to flap would keep its resource on one pass a second for as long as it flaps.
func (s progressByOwner) nextCheck(uid types.UID, phase string, phases int, now time.Time, interval time.Duration) time.Duration {
	if s.owners == nil || interval <= quickCheck {
		return interval
	}
	o, ok := s.owners.Get(uid)
	if !ok {
		return interval
	}
	p := o.(*ownerProgress)
	if p.windows == 0 || p.waiting != phase {
		p.waiting, p.quickUntil = phase, time.Time{}
		if p.windows < phases {
			p.windows++
			p.quickUntil = now.Add(quickChecksFor)
		}
	}
	if now.Before(p.quickUntil) {
		return quickCheck
	}
	return interval
}

// get returns what the passes of the resource uid learnt, on the HostedCluster named cluster.
func (s progressByOwner) get(uid types.UID, cluster string) *apply.Progress {
	if s.owners == nil {
		return apply.NewProgress(0)
	}
	o, ok := s.owners.Get(uid)
	if !ok || o.(*ownerProgress).cluster != cluster {
		o = &ownerProgress{cluster: cluster, progress: apply.NewProgress(0)}
	}
	s.owners.Set(uid, o, progressTTL)
	return o.(*ownerProgress).progress
}

// ProgressCheck says how soon a resource whose pass res did not complete is looked at again
// (nextCheck), interval when the pass completed.
func (r *Applier) ProgressCheck(uid types.UID, res *apply.Result, interval time.Duration) time.Duration {
	if res == nil || res.Complete() || res.Progressing() == nil {
		return interval
	}
	return r.progress.nextCheck(uid, res.Progressing().Name, len(res.Phases), time.Now(), interval)
}

// converged starts the quick checks of the resource uid afresh: it converged. What its passes
// learnt is kept: the last complete pass's findings spare an update the reads of the objects
// it does not change (apply.Request.Interval).
func (s progressByOwner) converged(uid types.UID) {
	if s.owners == nil {
		return
	}
	if o, ok := s.owners.Get(uid); ok {
		p := o.(*ownerProgress)
		p.waiting, p.quickUntil, p.windows = "", time.Time{}, 0
	}
}

// done forgets the resource uid: it is being deleted.
func (s progressByOwner) done(uid types.UID) {
	if s.owners != nil {
		s.owners.Delete(uid)
	}
}
