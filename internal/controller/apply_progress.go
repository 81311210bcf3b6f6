package controller

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

// done forgets the resource uid: it converged, or it is being deleted.
func (s progressByOwner) done(uid types.UID) {
	if s.owners != nil {
		s.owners.Delete(uid)
	}
}
