package apply

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// An owner's update (a new revision of its package) usually changes a few of its objects. The
// pass that takes it there would read every object before deciding to leave it or to write
// it: a request per object that changed nothing, and the read before each write is the
// collision check. Progress therefore also keeps what the last pass that completed every phase
// found of each object (settled): its desired-state hash and, for objects nobody else writes
// to, the resourceVersion the pass left it at. A pass whose desired states differ from the
// settled ones (an update) then
//   - neither reads nor sends an object whose desired state has not changed, if the owner's
//     passes read every object at least once per Request.Interval and the settled memory is
//     younger than that: drift of such an object is found by the next such pass, as it would
//     have been without the update;
//   - writes an object whose desired state changed without reading it first when the settled
//     memory holds its resourceVersion, however old the memory (the precondition, not the
//     interval, proves the object unchanged): the server-side apply carries it as a precondition,
//     so it writes only over the object exactly as pkgsync left it (owned, undrifted, not
//     recreated by someone else). Any other answer (409 Conflict included) falls back to the
//     read and the checks of any pass, so a stale memory costs a request, never a wrong
//     write.
//
// A pass whose desired states are all the settled ones (the owner's interval) reads every
// object as before, and settles again. Objects with a status (but Namespaces) are settled
// without a resourceVersion: their controllers write them (a Deployment's status changes with
// every rollout step), so the precondition would fail and cost a request.

// settledObject is what the last complete pass found of one object.
type settledObject struct {
	hash string
	// resourceVersion is the object's when the pass left it, empty when others write to it.
	resourceVersion string
}

// settledEntry is how Progress keeps a settledObject between passes: kept for every object of
// every owner, it is most of what an owner costs in memory once converged, so it holds digests
// instead of the five strings of its key and the hex string of its hash (48 bytes and the
// resourceVersion's, against some 300).
type settledEntry struct {
	key             keyDigest
	hash            hashDigest
	resourceVersion string
}

// keyDigest identifies an object's key: the first 16 bytes of its SHA-256, which no two
// objects of one owner share by chance (and a package's author who crafted two that do would
// only make the owner's update read its objects, or fail a precondition and read them).
type keyDigest [16]byte

// hashDigest is a desired-state hash (DesiredHashAnnotation, 32 hex digits) in bytes; a zero
// one is no hash.
type hashDigest [16]byte

func digestKey(k key) keyDigest {
	h := sha256.New()
	for _, part := range []string{k.class, k.group, k.kind, k.namespace, k.name} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	var d keyDigest
	copy(d[:], h.Sum(nil))
	return d
}

// digestHash decodes a desired-state hash; anything but 32 hex digits is no hash.
func digestHash(hash string) hashDigest {
	var d hashDigest
	if len(hash) != 2*len(d) {
		return hashDigest{}
	}
	if _, err := hex.Decode(d[:], []byte(hash)); err != nil {
		return hashDigest{}
	}
	return d
}

func (d hashDigest) String() string {
	if d == (hashDigest{}) {
		return ""
	}
	return hex.EncodeToString(d[:])
}

// compactSettled is what settle keeps of a pass's settled objects: sorted by key digest.
func compactSettled(objects map[key]settledObject) []settledEntry {
	if len(objects) == 0 {
		return nil
	}
	out := make([]settledEntry, 0, len(objects))
	for k, s := range objects {
		out = append(out, settledEntry{key: digestKey(k), hash: digestHash(s.hash), resourceVersion: s.resourceVersion})
	}
	slices.SortFunc(out, func(a, b settledEntry) int { return bytes.Compare(a.key[:], b.key[:]) })
	return out
}

// settledOf is what a pass found of an object available in its desired state: live is the
// object as the API server answered.
func settledOf(desired, live *unstructured.Unstructured) settledObject {
	s := settledObject{hash: desiredHashOf(desired)}
	if !othersWrite(live) {
		s.resourceVersion = live.GetResourceVersion()
	}
	return s
}

// othersWrite reports whether someone besides its appliers writes to an object: it has a
// status, which a controller keeps. A Namespace's status is the API server's own, set when it
// is created and changed only when it is deleted.
func othersWrite(live *unstructured.Unstructured) bool {
	if _, hasStatus := live.Object["status"]; !hasStatus {
		return false
	}
	gvk := live.GroupVersionKind()
	return gvk.Group != "" || gvk.Kind != "Namespace"
}

// settle remembers what a pass that completed every phase found of each object.
func (p *Progress) settle(objects map[key]settledObject) {
	compact := compactSettled(objects)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.settled, p.settledAt = compact, time.Now()
}

// isUpdate reports whether a pass whose objects have the desired-state hashes given updates
// what the last complete pass settled (some hash differs: changed), and whether that pass was
// less than interval ago (fresh). Only a fresh memory lets a pass skip an object it neither
// reads nor sends; a write over a settled resourceVersion proves for itself that nothing
// changed since (the precondition), at any age. A zero interval never trusts the settled
// memory.
func (p *Progress) isUpdate(hashes []string, interval time.Duration) (changed, fresh bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.settled) == 0 || interval <= 0 {
		return false, false
	}
	settled := make([]string, 0, len(p.settled))
	for _, s := range p.settled {
		settled = append(settled, s.hash.String())
	}
	slices.Sort(settled)
	if slices.Equal(settled, slices.Sorted(slices.Values(hashes))) {
		return false, false
	}
	return true, time.Since(p.settledAt) < interval
}

// settledAs returns what the last complete pass found of an object.
func (p *Progress) settledAs(k key) (settledObject, bool) {
	d := digestKey(k)
	p.mu.Lock()
	defer p.mu.Unlock()
	i, ok := slices.BinarySearchFunc(p.settled, d, func(e settledEntry, d keyDigest) int { return bytes.Compare(e.key[:], d[:]) })
	if !ok {
		return settledObject{}, false
	}
	e := p.settled[i]
	return settledObject{hash: e.hash.String(), resourceVersion: e.resourceVersion}, true
}

// forget forgets everything: a pass failed, or the request changed.
func (p *Progress) forget() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.available = nil
	p.settled = nil
}

// Settled is the number of objects the last complete pass settled.
func (p *Progress) Settled() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.settled)
}

// isUpdate reports whether the pass changes desired states the last complete pass settled,
// and whether that pass was within Request.Interval (Progress.isUpdate), every phase's objects
// prepared.
func (p *pass) isUpdate(states []*phaseState) (changed, fresh bool) {
	if p.progress == nil {
		return false, false
	}
	var hashes []string
	for _, s := range states {
		if s == nil || s.prepareErr != nil {
			return false, false
		}
		for _, obj := range s.objs {
			hashes = append(hashes, desiredHashOf(obj))
		}
	}
	return p.progress.isUpdate(hashes, p.req.Interval)
}

// settledAll is what a complete pass settles: every object it found available in its desired
// state, or nothing when it did not find them all so (drift reported and left, say), so that
// the next pass is not mistaken for an update and reads every object.
func (p *pass) settledAll(states []*phaseState) map[key]settledObject {
	n := 0
	for _, s := range states {
		if s != nil {
			n += len(s.objs)
		}
	}
	if len(p.settled) != n {
		return nil
	}
	return p.settled
}

// settledUnchanged reports whether, in an update pass, obj's desired state is the one the
// last complete pass settled: it is neither read nor sent.
func (p *pass) settledUnchanged(k key, obj *unstructured.Unstructured) bool {
	if !p.update || !p.fresh || p.progress == nil {
		return false
	}
	s, ok := p.progress.settledAs(k)
	return ok && s.hash != "" && s.hash == desiredHashOf(obj)
}

// knownVersion returns, in an update pass, the resourceVersion the last complete pass left an
// object at whose desired state changed since: its write needs no read first.
func (p *pass) knownVersion(k key, obj *unstructured.Unstructured) string {
	if !p.update || p.req.Progress == nil || isJob(obj) {
		return ""
	}
	s, ok := p.req.Progress.settledAs(k)
	if !ok || s.hash == desiredHashOf(obj) {
		return ""
	}
	return s.resourceVersion
}
