package apply

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Progress remembers what the passes taking one owner to its desired state learnt of its
// objects, so that the passes that follow while a later object is still becoming available
// cost only what is not done yet. A package that waits on a Deployment for twenty passes
// would otherwise read every object of its earlier phases twenty times, and read each object
// of its later phases before creating it, each read a request to a shared API server.
//
// It remembers two things:
//   - the objects found available, with the desired-state hash they were applied with: the
//     next passes neither send nor read them while that hash is the one desired, for maxAge
//     (NewProgress) after they were found available at most. A new revision of an object reads it again; so
//     does any change to how a pass judges objects (owner, probes, adoption, drift policy,
//     ignored fields, confinement, target names), and a pass that fails in any way forgets them
//     all. An object with condition mappings, and a CRD, is always read. A pass that would
//     complete every phase reads the objects it skipped first: an owner is never reported
//     complete on memory alone.
//   - the objects recorded as intended (Request.Record) that no pass has sent yet: the next pass
//     creates them without reading them first, as it does objects Previous does not hold. A
//     create that finds the object exists writes nothing and falls back to the read, so a wrong
//     memory costs a request, never a write.
//
// The engine forgets what was found available once a pass completes every phase, so the passes
// of a converged owner (its interval) read each object as before: drift is found by those
// reads, and hidden by this memory for maxAge at most while the owner has not converged. What
// that complete pass found is kept instead, for the owner's next update (settled.go). The
// caller keeps one Progress per owner, in memory only (a restarted controller reads every
// object again), and drops it with the owner. It is safe for concurrent use.
type Progress struct {
	maxAge      time.Duration
	mu          sync.Mutex
	fingerprint string
	available   map[key]found
	unsent      map[key]bool
	// settled is what the last pass that completed every phase found, at settledAt (settled.go).
	settled   []settledEntry
	settledAt time.Time
}

// found is an object found available: with which desired-state hash, and when.
type found struct {
	hash string
	at   time.Time
}

// DefaultProgressMaxAge is how long an object found available is taken to stay so while its
// owner has not converged, when NewProgress is given no age.
const DefaultProgressMaxAge = time.Minute

// NewProgress returns an empty Progress whose objects found available are read again maxAge
// after (DefaultProgressMaxAge when zero or less).
func NewProgress(maxAge time.Duration) *Progress {
	if maxAge <= 0 {
		maxAge = DefaultProgressMaxAge
	}
	return &Progress{maxAge: maxAge}
}

// Available is the number of objects remembered as available.
func (p *Progress) Available() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.available)
}

// begin starts a pass of a request with the given fingerprint: what was found available under
// another one is forgotten.
func (p *Progress) begin(fingerprint string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fingerprint != fingerprint {
		p.fingerprint = fingerprint
		p.available = nil
		p.settled = nil
	}
}

// isAvailable reports whether the object, in the desired state whose hash is given, was found
// available.
func (p *Progress) isAvailable(k key, hash string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, ok := p.available[k]
	return ok && hash != "" && f.hash == hash && time.Since(f.at) < p.maxAge
}

// found remembers whether an object was found available in the desired state whose hash is
// given; it has been sent.
func (p *Progress) found(k key, hash string, available bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.unsent, k)
	if len(p.unsent) == 0 {
		p.unsent = nil // a map keeps its size once emptied; a converged owner needs none
	}
	if available && hash != "" {
		if p.available == nil {
			p.available = map[key]found{}
		}
		p.available[k] = found{hash: hash, at: time.Now()}
	} else {
		delete(p.available, k)
	}
}

// recorded remembers objects recorded as intended, not sent yet.
func (p *Progress) recorded(keys []key) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.unsent == nil && len(keys) > 0 {
		p.unsent = make(map[key]bool, len(keys))
	}
	for _, k := range keys {
		p.unsent[k] = true
	}
}

// isUnsent reports whether the object was recorded as intended and never sent.
func (p *Progress) isUnsent(k key) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.unsent[k]
}

// forgetAvailable forgets what was found available: every phase is complete.
func (p *Progress) forgetAvailable() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.available = nil // not cleared: a map keeps its size, and a converged owner needs none
}

// progressFingerprint digests what, besides an object's desired state, decides whether a pass
// finds it available and leaves it as it is.
func progressFingerprint(req Request) (string, error) {
	targets := make([]string, 0, len(req.Targets))
	for class, t := range req.Targets {
		targets = append(targets, class+"="+t.Name)
	}
	sort.Strings(targets)
	data, err := json.Marshal(struct {
		Owner        Owner
		Probes       any
		Adopt        any
		DriftPolicy  any
		IgnoreFields any
		Confine      map[string]string
		Default      string
		Targets      []string
	}{req.Owner, req.Probes, req.Adopt, req.DriftPolicy, req.IgnoreFields, req.Confine, req.DefaultNamespace, targets})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// available reports whether applying the object found it available in its desired state, with
// nothing to report: drift left alone is reported by every pass, so it is not available to skip.
func (r *appliedObject) available() bool {
	return r.ran && r.err == nil && r.out.live != nil && r.out.waiting == "" && len(r.reasons) == 0 && r.out.drift == nil
}

// availableBefore reports whether an earlier pass found obj available in its desired state,
// so that this pass need not send or read it, and whether that pass was the last complete one
// (settled: it is not read before this pass completes either, settled.go). CRDs are always
// read (the custom resources of their phase wait for them to be Established), and so are
// objects whose conditions the phase maps (they are reported from the live object).
func (p *pass) availableBefore(s *phaseState, obj *unstructured.Unstructured) (available, settled bool) {
	if p.progress == nil || len(s.mappings[s.origin[obj]]) > 0 {
		return false, false
	}
	if _, ok := crdKind(obj); ok {
		return false, false
	}
	k := RefOf(obj).key(s.ph.Class)
	if p.settledUnchanged(k, obj) {
		return true, true
	}
	return p.progress.isAvailable(k, desiredHashOf(obj)), false
}

// isNew reports whether an object is expected not to exist, so that it is created without a
// read first: Previous does not hold it, or it holds it only because an earlier pass recorded
// it as intended and never sent it.
func (p *pass) isNew(k key) bool {
	return !p.previous[k] || (p.progress != nil && p.progress.isUnsent(k))
}

// forgetAvailable forgets what earlier passes found available, and stops this pass from
// skipping or remembering anything more.
func (p *pass) forgetAvailable() {
	if p.progress != nil {
		p.progress.forgetAvailable()
		p.progress = nil
	}
}

// found remembers whether the pass found the object r sent available in its desired state.
func (p *pass) found(s *phaseState, r *appliedObject) {
	available := r.available()
	k := RefOf(r.obj).key(s.ph.Class)
	if available {
		p.settled[k] = settledOf(r.obj, r.out.live)
	}
	if p.progress != nil {
		p.progress.found(k, desiredHashOf(r.obj), available)
	}
}
