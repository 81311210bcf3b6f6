package controller

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"pkgsync.dev/pkgsync/apply"
)

// progressTTL drops what the passes of a resource learnt when it has made no pass for this
// long: it was deleted, or moved to another controller, before it converged.
const progressTTL = 30 * time.Minute

// progressByOwner keeps, per resource, what its passes learnt of its objects (apply.Progress),
// so that the passes that wait on a later object neither read again the objects found
// available nor read before creating the objects recorded and not sent yet. It is memory only:
// a restarted controller reads every object once more.
type progressByOwner struct {
	mu        sync.Mutex
	owners    map[types.UID]*ownerProgress
	lastSweep time.Time
}

type ownerProgress struct {
	// cluster names the HostedCluster behind the resource's namespace when the memory was
	// made: another one starts afresh.
	cluster  string
	progress *apply.Progress
	used     time.Time
}

// get returns what the passes of the resource uid learnt, on the HostedCluster named cluster.
func (s *progressByOwner) get(uid types.UID, cluster string, now time.Time) *apply.Progress {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owners == nil {
		s.owners = map[types.UID]*ownerProgress{}
	}
	if now.Sub(s.lastSweep) > progressTTL/10 {
		for id, o := range s.owners {
			if now.Sub(o.used) > progressTTL {
				delete(s.owners, id)
			}
		}
		s.lastSweep = now
	}
	o := s.owners[uid]
	if o == nil || o.cluster != cluster {
		o = &ownerProgress{cluster: cluster, progress: apply.NewProgress(0)}
		s.owners[uid] = o
	}
	o.used = now
	return o.progress
}

// done forgets the resource uid: it converged, or it is being deleted.
func (s *progressByOwner) done(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.owners, uid)
}
