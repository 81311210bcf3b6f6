package apply

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/desired"
)

// applyPhase applies the objects of one phase and notes which are not available.
func (e *Engine) applyPhase(ctx context.Context, p *pass, s *phaseState) error {
	pr := s.pr
	pr.State = v1alpha1.PhaseProgressing
	if s.prepareErr != nil {
		return s.prepareErr
	}
	if err := p.recordPhase(s); err != nil {
		return err
	}
	var errs []error
	for _, step := range s.steps() {
		stop, err := e.applyStep(ctx, p, s, step)
		if err != nil {
			errs = append(errs, err)
		}
		if stop {
			break
		}
	}
	if len(errs) == 0 && len(pr.NotAvailable) == 0 {
		pr.State = v1alpha1.PhaseComplete
	}
	return errors.Join(errs...)
}

// phaseState is what applying one phase's objects shares.
type phaseState struct {
	ph     desired.Phase
	key    phaseKey
	target Target
	pr     *PhaseResult
	// objs are the prepared objects, in the order they are applied; prepareErr says why they
	// could not be prepared.
	objs       []*unstructured.Unstructured
	prepareErr error
	// origin maps a prepared object to its index in ph.Objects; mappings holds the condition
	// mappings by that index.
	origin   map[*unstructured.Unstructured]int
	mappings map[int][]desired.ConditionMapping
	// crdOf holds the CRDs of the phase by the kind they define; established says which of
	// them the API server reported Established.
	crdOf       map[schema.GroupKind]ObjectRef
	established map[schema.GroupKind]bool
	// skipped holds the objects not sent because an earlier pass found them available
	// (Request.Progress), in the order of objs: verifySkipped reads them before the pass
	// completes.
	skipped []*unstructured.Unstructured
}

func newPhaseState(ph desired.Phase, target Target, pr *PhaseResult, owner Owner) *phaseState {
	s := &phaseState{ph: ph, key: phaseKey{ph.Name, ph.Class}, target: target, pr: pr,
		mappings: map[int][]desired.ConditionMapping{}, crdOf: map[schema.GroupKind]ObjectRef{}, established: map[schema.GroupKind]bool{}}
	s.objs, s.origin, s.prepareErr = prepare(ph.Objects, owner)
	for _, m := range ph.ConditionMappings {
		s.mappings[m.Object] = append(s.mappings[m.Object], m)
	}
	// Custom resources wait for the CRDs of the same phase to be Established.
	for _, obj := range s.objs {
		if gk, ok := crdKind(obj); ok {
			s.crdOf[gk] = RefOf(obj)
		}
	}
	return s
}

// steps splits the prepared objects into the runs that are applied one after the other: the
// CRDs, the Namespaces, the rest (prepare orders them so). The objects of one step are applied
// side by side; a step starts once the one before it is done, so custom resources see whether
// their CRD is Established and namespaced objects find their Namespace.
func (s *phaseState) steps() [][]*unstructured.Unstructured { return stepsOf(s.objs) }

// stepsOf splits objects, ordered by rank, into runs of one rank.
func stepsOf(objs []*unstructured.Unstructured) [][]*unstructured.Unstructured {
	var out [][]*unstructured.Unstructured
	for i := 0; i < len(objs); {
		j := i + 1
		for j < len(objs) && rank(objs[j]) == rank(objs[i]) {
			j++
		}
		out = append(out, objs[i:j])
		i = j
	}
	return out
}

// applied is what applying one object of a step came to.
type appliedObject struct {
	obj *unstructured.Unstructured
	// crd names the CRD of the same phase the object waits for; nothing was sent.
	crd string
	// resolved says the object's namespace resolved (its kind is served).
	resolved bool
	// ran says the object was sent (or read); false for objects after a stop.
	ran bool
	// availableBefore says an earlier pass found the object available in this desired state
	// (Request.Progress): nothing was sent.
	availableBefore bool
	// settled says the last complete pass found it in this desired state (settled.go): it is
	// not read before the pass completes either.
	settled bool
	out     outcome
	err     error
	reasons []string
	// failed says kstatus found the object Failed: waiting will not make it available.
	failed bool
}

// applyStep applies the objects of one step side by side (at most Options.Concurrency at once,
// and Options.MaxInFlight across the Engine) and reports them in their order. stop says the rest
// of the phase must not be tried: the inventory could not be recorded, or the cluster is not
// answering (every further object would wait out its own timeout, holding the caller's worker
// for nothing).
func (e *Engine) applyStep(ctx context.Context, p *pass, s *phaseState, objs []*unstructured.Unstructured) (stop bool, err error) {
	results, fresh := p.stepObjects(s, objs)
	// Kinds served since the pass began (a CRD of an earlier phase): recorded before their write.
	if err := p.recordIntended(fresh); err != nil {
		return true, err
	}

	var (
		wg      sync.WaitGroup
		stopped atomic.Bool
		slots   = make(chan struct{}, e.concurrency)
	)
	for i := range results {
		r := &results[i]
		if r.crd != "" || r.availableBefore {
			continue
		}
		if !e.acquire(ctx, slots) {
			break // the context ended: the objects not sent are not reported
		}
		if stopped.Load() {
			e.release(slots)
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer e.release(slots)
			e.applyOne(ctx, p, s, r)
			var unavailable *TargetUnavailableError
			if errors.As(r.err, &unavailable) {
				stopped.Store(true)
			}
		}()
	}
	wg.Wait()

	var errs []error
	for i := range results {
		r := &results[i]
		if err := p.report(s, r); err != nil {
			errs = append(errs, err)
		}
		if r.ran {
			p.found(s, r)
		}
	}
	return stopped.Load(), errors.Join(errs...)
}

// stepObjects returns the objects of a step as the step will treat them: waiting for their CRD,
// with their namespace resolved, found available by an earlier pass; and the ones to record as
// intended before anything is written.
func (p *pass) stepObjects(s *phaseState, objs []*unstructured.Unstructured) ([]appliedObject, []intendedRef) {
	results := make([]appliedObject, len(objs))
	var fresh []intendedRef
	for i, obj := range objs {
		r := &results[i]
		r.obj = obj
		gk := obj.GroupVersionKind().GroupKind()
		if crd, ok := s.crdOf[gk]; ok && !s.established[gk] {
			r.crd = crd.String()
			continue
		}
		if resolveNamespace(p.req, s.target, obj) == nil {
			r.resolved = true
			r.availableBefore, r.settled = p.availableBefore(s, obj)
			fresh = append(fresh, intendedRef{phase: s.key, ref: RefOf(obj)})
		}
	}
	return results, fresh
}

// applyOne applies one object of a step and checks its availability, into r.
func (e *Engine) applyOne(ctx context.Context, p *pass, s *phaseState, r *appliedObject) {
	r.ran = true
	var ran *v1alpha1.InventoryJob
	if r.resolved {
		ran = ranBefore(p.ranJobs, s.ph.Class, r.obj)
	}
	k := RefOf(r.obj).key(s.ph.Class)
	// A Job that ran may be gone: it is read, never created unread.
	before := prior{ran: ran, isNew: r.resolved && ran == nil && p.isNew(k)}
	if r.resolved && ran == nil {
		before.version = p.knownVersion(k, r.obj)
	}
	r.out, r.err = e.applyObject(ctx, p.req, s.ph.Class, s.target, r.obj, before)
	switch {
	case r.err != nil:
	case r.out.job != nil:
		// A Job that ran to an end, gone or going: available as it finished, whatever kstatus
		// makes of an object being deleted.
		r.reasons, r.failed = jobReasons(*r.out.job)
	case r.out.live != nil && r.out.waiting == "" && !p.req.DryRun:
		r.reasons, r.failed, r.err = availability(ctx, r.out.live, p.probes)
		if r.err != nil {
			r.err = &availabilityError{err: fmt.Errorf("check availability of %s: %w", RefOf(r.obj), r.err)}
		}
	}
}

// report adds what applying one object came to to the pass's result, in the step's order.
func (p *pass) report(s *phaseState, r *appliedObject) error {
	ref := RefOf(r.obj)
	switch {
	case r.crd != "":
		if p.req.DryRun {
			p.res.addChange(ref, ActionCreated) // cannot be validated before its CRD exists
			return nil
		}
		s.pr.NotAvailable = append(s.pr.NotAvailable, ObjectStatus{Ref: ref, Reason: "waiting for " + r.crd + " to be Established"})
		return nil
	case r.availableBefore:
		p.applied[ref.key(s.ph.Class)] = s.key
		p.inv.add(s.ph.Name, s.ph.Class, ref)
		if settled, ok := p.req.Progress.settledAs(ref.key(s.ph.Class)); r.settled && ok {
			p.settled[ref.key(s.ph.Class)] = settled
		} else {
			s.skipped = append(s.skipped, r.obj)
		}
		return nil
	case !r.ran:
		return nil
	}
	var availErr *availabilityError
	if r.err != nil && !errors.As(r.err, &availErr) {
		if p.req.DryRun && p.namespaceComesFirst(s.ph.Class, r.obj, r.err) {
			p.res.addChange(ref, ActionCreated) // cannot be validated before its namespace exists
			return nil
		}
		if !p.req.DryRun && r.resolved {
			if mayHaveWritten(r.err) {
				// The answer was lost, not a refusal: the object may exist now. Track it, so that
				// teardown and prune still find it (they delete only what carries the owner's
				// labels, so an object that was never written costs one lookup).
				p.inv.add(s.ph.Name, s.ph.Class, ref)
			} else {
				p.refused[ref.key(s.ph.Class)] = true
			}
		}
		return r.err
	}
	p.applied[ref.key(s.ph.Class)] = s.key
	if r.out.action != "" {
		p.res.addChange(ref, r.out.action)
	}
	p.res.noteDrift(r.out.drift)
	if gk, ok := crdKind(r.obj); ok && r.out.live != nil {
		s.established[gk] = crdEstablished(r.out.live)
	}
	if p.req.DryRun {
		return nil
	}
	p.inv.add(s.ph.Name, s.ph.Class, ref)
	p.noteJob(s, r)
	p.res.Conditions = append(p.res.Conditions, mapConditions(r.out.live, s.mappings[s.origin[r.obj]])...)
	if r.out.waiting != "" {
		s.pr.NotAvailable = append(s.pr.NotAvailable, ObjectStatus{Ref: ref, Reason: r.out.waiting})
		return nil
	}
	if availErr != nil {
		return availErr.err
	}
	for i, reason := range r.reasons {
		s.pr.NotAvailable = append(s.pr.NotAvailable, ObjectStatus{Ref: ref, Reason: reason, Failed: r.failed && i == 0})
	}
	return nil
}

// mayHaveWritten reports whether a failed write may still have reached the API server: every
// error but an answer from the server itself (a refusal such as 409 or 422 leaves nothing behind),
// or a server-side timeout, whose write may still complete.
func mayHaveWritten(err error) bool {
	var (
		status    apierrors.APIStatus
		collision *CollisionError
		conflict  *ConflictError
		immutable *ImmutableFieldError
		confined  *ConfinementError
	)
	if errors.As(err, &collision) || errors.As(err, &conflict) || errors.As(err, &immutable) || errors.As(err, &confined) {
		return false // refused before or by the server: nothing was written
	}
	if !errors.As(err, &status) {
		return true
	}
	return apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsInternalError(err)
}

// namespaceComesFirst reports whether err says the object's namespace does not exist while the
// package itself creates that namespace: a dry run cannot create it, so the object cannot be
// validated yet.
func (p *pass) namespaceComesFirst(class string, obj *unstructured.Unstructured, err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || !apierrors.IsNotFound(err) {
		return false
	}
	details := status.Status().Details
	if details == nil || details.Kind != "namespaces" {
		return false
	}
	_, ok := p.desired[ObjectRef{Version: "v1", Kind: "Namespace", Name: details.Name}.key(class)]
	return ok && details.Name == obj.GetNamespace()
}
