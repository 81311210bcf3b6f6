package apply

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/desired"
)

// Options configure an Engine.
type Options struct {
	// FieldManager is the server-side apply field manager; DefaultFieldManager when empty.
	FieldManager string
	// Concurrency bounds the objects one pass applies at once within a phase;
	// DefaultConcurrency when zero or less.
	Concurrency int
	// MaxInFlight bounds the objects applied at once by every pass of the Engine together, so
	// that many passes running side by side (the controller's workers) do not multiply
	// Concurrency; unbounded when zero or less.
	MaxInFlight int
}

// DefaultConcurrency is Options.Concurrency when unset: measured, a package of 8000 objects in
// one phase converged in 15.5 s at 16 and 18.6 s at 8; packages of a few objects per phase
// do not reach it (docs/benchmarks.md).
const DefaultConcurrency = 16

// Engine applies phases and tears them down. It holds no per-owner state and is safe for
// concurrent use; it caches compiled CEL probes.
type Engine struct {
	fieldManager string
	cel          celCache
	concurrency  int
	// inFlight holds a token per object being applied, across passes; nil when unbounded.
	inFlight chan struct{}
}

// NewEngine returns an Engine.
func NewEngine(opts Options) *Engine {
	if opts.FieldManager == "" {
		opts.FieldManager = DefaultFieldManager
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultConcurrency
	}
	e := &Engine{fieldManager: opts.FieldManager, concurrency: opts.Concurrency}
	if opts.MaxInFlight > 0 {
		e.inFlight = make(chan struct{}, opts.MaxInFlight)
	}
	return e
}

// pass carries the state of one Apply call.
type pass struct {
	req    Request
	probes probeSet
	res    *Result
	inv    *inventoryBuilder
	// desired holds the objects of the package by their rendered reference; applied by the
	// reference the API server resolved (namespace defaulted, or cleared for cluster-scoped kinds).
	desired, applied map[key]phaseKey
	// recorded holds what the caller has stored of the inventory: Previous, and what Record took.
	recorded map[key]bool
	intended []intendedRef
	// previous holds the objects of Previous: an object it does not hold is created without
	// being read first (applyObject).
	previous map[key]bool
	// refused holds the objects whose write the API server refused in this pass (a collision, a
	// conflict): recorded as intended, but not kept in the inventory the pass returns.
	refused map[key]bool
	// recordCtx is the caller's context: Record writes the caller's status, on the management
	// cluster, and must not run under (or use up) a hosted target's budget.
	recordCtx context.Context
	// progress is Request.Progress while the pass may use it: nil in a dry run, and once the
	// pass has forgotten what was found available (forgetAvailable).
	progress *Progress
	// ranJobs holds the Job records of Previous, jobs those this pass made (job.go).
	ranJobs, jobs map[key]v1alpha1.InventoryJob
}

// intendedRef is an object Record was told about.
type intendedRef struct {
	phase phaseKey
	ref   ObjectRef
}

// recordIntended hands Request.Record the intended inventory when refs holds objects not
// recorded yet.
func (p *pass) recordIntended(refs []intendedRef) error {
	if p.req.Record == nil || p.req.DryRun {
		return nil
	}
	var fresh []intendedRef
	for _, ir := range refs {
		if !p.recorded[ir.ref.key(ir.phase.class)] {
			fresh = append(fresh, ir)
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	b := newInventoryBuilder()
	for _, rph := range p.req.Phases {
		b.addPhase(rph.Name, rph.Class)
	}
	for _, prev := range p.req.Previous.Phases {
		for _, ref := range prev.Objects {
			b.add(prev.Name, prev.Class, ref)
		}
	}
	for _, ir := range p.intended {
		b.add(ir.phase.name, ir.phase.class, ir.ref)
	}
	for _, ir := range fresh {
		b.add(ir.phase.name, ir.phase.class, ir.ref)
	}
	p.addJobs(b) // a crash after this write must not make a Job that ran run again
	if err := p.req.Record(p.recordCtx, b.build()); err != nil {
		return fmt.Errorf("record the inventory before writing: %w", err)
	}
	keys := make([]key, 0, len(fresh))
	for _, ir := range fresh {
		p.recorded[ir.ref.key(ir.phase.class)] = true
		p.intended = append(p.intended, ir)
		keys = append(keys, ir.ref.key(ir.phase.class))
	}
	if p.progress != nil {
		p.progress.recorded(keys)
	}
	return nil
}

// phaseOf returns the phase that holds an object of a class's cluster in the new revision.
func (p *pass) phaseOf(class string, ref ObjectRef) (phaseKey, bool) {
	if pk, ok := p.applied[ref.key(class)]; ok {
		return pk, true
	}
	if pk, ok := p.desired[ref.key(class)]; ok {
		return pk, true
	}
	if ref.Namespace != "" && ref.Namespace == p.req.DefaultNamespace {
		unset := ref
		unset.Namespace = ""
		pk, ok := p.desired[unset.key(class)]
		return pk, ok
	}
	return phaseKey{}, false
}

type phaseKey struct{ name, class string }

// Apply makes one non-blocking pass over the phases: it applies each phase and checks its
// availability, and stops at the first phase that is not complete. When every phase is complete
// it prunes the previous objects that left the package. The caller stores Result.Inventory and
// calls again (requeues) until Result.Complete. The Result is returned even with an error.
func (e *Engine) Apply(ctx context.Context, req Request) (*Result, error) {
	p := newPass(ctx, req)
	if err := p.check(&e.cel); err != nil {
		p.forgetAvailable()
		p.res.Inventory = req.Previous
		return p.res, err
	}
	states := make([]*phaseState, len(req.Phases))
	for i, ph := range req.Phases {
		if target, ok := req.Targets[ph.Class]; ok && target.Client != nil {
			states[i] = newPhaseState(ph, target, &p.res.Phases[i], req.Owner)
		}
	}
	budgets := newBudgets(ctx)
	defer budgets.stop()
	var errs []error
	if err := p.recordAll(states); err != nil {
		errs = append(errs, err) // the inventory could not be recorded: nothing is written
	} else {
		errs = e.applyPhases(budgets, p, states)
	}
	if len(errs) == 0 && p.res.Complete() {
		// Converging: the passes of its interval read every object again, and this one reads
		// what it skipped before it completes.
		p.forgetAvailable()
		errs = e.verifySkipped(budgets, p, states)
	}

	pruned := map[key]bool{}
	if len(errs) == 0 && p.res.Complete() && !req.DryRun && !req.NoPrune {
		var err error
		pruned, err = e.prune(ctx, p)
		if err != nil {
			errs = append(errs, err)
		}
	}
	if req.DryRun {
		p.res.Inventory = req.Previous
		return p.res, errors.Join(errs...)
	}
	if len(errs) > 0 {
		p.forgetAvailable() // the memory may be what keeps the owner from converging
	}
	p.res.Inventory = p.inventory(pruned)
	return p.res, errors.Join(errs...)
}

// newPass starts a pass of req: every phase pending, what the previous revision recorded, and
// in which phase each desired object is.
func newPass(ctx context.Context, req Request) *pass {
	p := &pass{req: req, res: &Result{}, inv: newInventoryBuilder(), desired: map[key]phaseKey{}, applied: map[key]phaseKey{},
		recorded: map[key]bool{}, previous: map[key]bool{}, refused: map[key]bool{}, recordCtx: ctx,
		ranJobs: jobRuns(req.Previous), jobs: map[key]v1alpha1.InventoryJob{}}
	for _, ph := range req.Previous.Phases {
		for _, ref := range ph.Objects {
			p.recorded[ref.key(ph.Class)] = true
			p.previous[ref.key(ph.Class)] = true
		}
	}
	if req.Progress != nil && !req.DryRun {
		if fp, err := progressFingerprint(req); err == nil {
			p.progress = req.Progress
			p.progress.begin(fp)
		}
	}
	for _, ph := range req.Phases {
		p.res.Phases = append(p.res.Phases, PhaseResult{Name: ph.Name, Class: ph.Class, State: v1alpha1.PhasePending})
		p.inv.addPhase(ph.Name, ph.Class)
		for _, obj := range ph.Objects {
			p.desired[RefOf(obj).key(ph.Class)] = phaseKey{ph.Name, ph.Class}
		}
	}
	return p
}

// check refuses a request that must not be applied at all (probes that do not compile,
// ignored fields pkgsync cannot leave to others, objects outside the owner's confinement)
// before anything is written, and compiles the probes.
func (p *pass) check(cache *celCache) error {
	probes, err := compileProbes(p.req.Probes, cache)
	if err != nil {
		return fmt.Errorf("compile availability probes: %w", err)
	}
	p.probes = probes
	if err := checkIgnoreFields(p.req.IgnoreFields); err != nil {
		return err
	}
	return checkConfinement(p.req)
}

// budgets holds the context of each cluster's time budget (Target.Budget) in one pass: every
// phase of the cluster, and the reads of verifySkipped, share it.
type budgets struct {
	ctx     context.Context
	byClass map[string]context.Context
	cancels []context.CancelFunc
}

func newBudgets(ctx context.Context) *budgets {
	return &budgets{ctx: ctx, byClass: map[string]context.Context{}}
}

// of returns the context the phase of a class on target runs under.
func (b *budgets) of(class string, target Target) context.Context {
	if target.Budget <= 0 {
		return b.ctx
	}
	if ctx, ok := b.byClass[class]; ok {
		return ctx
	}
	ctx, cancel := context.WithTimeout(b.ctx, target.Budget)
	b.byClass[class] = ctx
	b.cancels = append(b.cancels, cancel)
	return ctx
}

func (b *budgets) stop() {
	for _, cancel := range b.cancels {
		cancel()
	}
}

// applyPhases applies the phases in order and stops at the first that is not complete (a dry
// run goes through all of them). Phases of one cluster share its time budget.
func (e *Engine) applyPhases(budgets *budgets, p *pass, states []*phaseState) []error {
	var errs []error
	for i, ph := range p.req.Phases {
		pr := &p.res.Phases[i]
		s := states[i]
		if s == nil {
			return append(errs, fmt.Errorf("phase %s: %w", ph.Name, &TargetUnavailableError{Class: ph.Class, Err: ErrNoTarget}))
		}
		pr.Target = s.target.Name
		if err := e.applyPhase(budgets.of(ph.Class, s.target), p, s); err != nil {
			errs = append(errs, fmt.Errorf("phase %s on %s: %w", ph.Name, s.target.Name, err))
		}
		if pr.State != v1alpha1.PhaseComplete && !p.req.DryRun {
			break
		}
	}
	return errs
}

// inventory is what the pass leaves tracked: what it applied, what it recorded as intended and
// was not refused (written or not yet: the next pass then has nothing new to record), and what
// the previous revision applied: objects still desired in the phase that now holds them, the
// others in their old phase until they are pruned.
func (p *pass) inventory(pruned map[key]bool) Inventory {
	for _, ir := range p.intended {
		if !p.refused[ir.ref.key(ir.phase.class)] {
			p.inv.add(ir.phase.name, ir.phase.class, ir.ref)
		}
	}
	for _, ph := range p.req.Previous.Phases {
		for _, ref := range ph.Objects {
			if pk, ok := p.phaseOf(ph.Class, ref); ok {
				p.inv.add(pk.name, pk.class, ref)
			} else if !pruned[ref.key(ph.Class)] && !p.req.NoPrune {
				p.inv.add(ph.Name, ph.Class, ref)
			}
		}
	}
	p.addJobs(p.inv)
	return p.inv.build()
}

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

// verifySkipped reads, before a pass reports every phase complete, the objects it skipped as
// found available by earlier passes (Request.Progress), once the pass has forgotten them: an
// owner is never reported complete on memory alone. Each is handled as in any pass (recreated
// when deleted, corrected when drifted); one that is not available keeps its phase from
// completing. Later phases were applied meanwhile: the object was available when the pass
// before found it so, which is all the phase order promises.
func (e *Engine) verifySkipped(budgets *budgets, p *pass, states []*phaseState) []error {
	var errs []error
	for _, s := range states {
		if s == nil || len(s.skipped) == 0 {
			continue
		}
		skipped := s.skipped
		s.skipped = nil
		var phaseErrs []error
		for _, step := range stepsOf(skipped) {
			stop, err := e.applyStep(budgets.of(s.ph.Class, s.target), p, s, step)
			if err != nil {
				phaseErrs = append(phaseErrs, err)
			}
			if stop {
				break
			}
		}
		if len(phaseErrs) > 0 || len(s.pr.NotAvailable) > 0 {
			s.pr.State = v1alpha1.PhaseProgressing
		}
		for _, err := range phaseErrs {
			errs = append(errs, fmt.Errorf("phase %s on %s: %w", s.ph.Name, s.target.Name, err))
		}
	}
	return errs
}

// intendedOf returns the objects of the phase whose namespace resolves, for Record: objects of
// kinds the cluster does not serve yet are left out (they are recorded when they are written).
// err is a failure to look a kind up (discovery), not a kind the cluster does not serve.
func (p *pass) intendedOf(s *phaseState) (intended []intendedRef, err error) {
	for _, obj := range s.objs {
		if _, waits := s.crdOf[obj.GroupVersionKind().GroupKind()]; waits {
			continue
		}
		err := resolveNamespace(p.req, s.target, obj)
		switch {
		case err == nil:
			intended = append(intended, intendedRef{phase: s.key, ref: RefOf(obj)})
		case !meta.IsNoMatchError(err) && !errors.Is(err, errNoNamespace):
			return nil, fmt.Errorf("%s: look up kind: %w", RefOf(obj), err)
		}
	}
	return intended, nil
}

// recordAll records what the phases will create, in one call before the first write of the
// pass: a pass that creates a package records its inventory once, not once per phase. It looks
// kinds up only on clusters the pass talks to before anything can wait: the management cluster
// (confinement looked its kinds up already) and the cluster of the first phase. A hosted phase
// after a management phase is left to recordPhase, so that a pass held by a management phase
// never waits on an unreachable hosted API server's discovery; so are phases whose kinds cannot
// be looked up now.
func (p *pass) recordAll(states []*phaseState) error {
	if p.req.Record == nil || p.req.DryRun {
		return nil
	}
	var all []intendedRef
	reach := map[string]bool{"": true}
	for i, s := range states {
		if s == nil || s.prepareErr != nil {
			continue
		}
		if i == 0 {
			reach[s.ph.Class] = true
		}
		if !reach[s.ph.Class] {
			continue
		}
		intended, err := p.intendedOf(s)
		if err != nil {
			reach[s.ph.Class] = false // recordPhase reports it when the phase is reached
			continue
		}
		all = append(all, intended...)
	}
	return p.recordIntended(all)
}

// recordPhase records what the phase will create before its first write, when recordAll did
// not (objects of kinds the cluster does not serve yet are recorded when they are written, by
// applyStep).
func (p *pass) recordPhase(s *phaseState) error {
	intended, err := p.intendedOf(s)
	if err != nil {
		// Discovery failed: every further object would wait out the same timeout. Nothing of
		// the phase was written: it is still pending, as it is when its target is missing.
		s.pr.State = v1alpha1.PhasePending
		return unreachable(err, s.ph.Class, s.target)
	}
	return p.recordIntended(intended)
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
	out             outcome
	err             error
	reasons         []string
	// failed says kstatus found the object Failed: waiting will not make it available.
	failed bool
}

// applyStep applies the objects of one step side by side (at most Options.Concurrency at once,
// and Options.MaxInFlight across the Engine) and reports them in their order. stop says the rest
// of the phase must not be tried: the inventory could not be recorded, or the cluster is not
// answering (every further object would wait out its own timeout, holding the caller's worker
// for nothing).
func (e *Engine) applyStep(ctx context.Context, p *pass, s *phaseState, objs []*unstructured.Unstructured) (stop bool, err error) {
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
			r.availableBefore = p.availableBefore(s, obj)
			fresh = append(fresh, intendedRef{phase: s.key, ref: RefOf(obj)})
		}
	}
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
			r.ran = true
			var ran *v1alpha1.InventoryJob
			if r.resolved {
				ran = ranBefore(p.ranJobs, s.ph.Class, r.obj)
			}
			// A Job that ran may be gone: it is read, never created unread.
			isNew := r.resolved && ran == nil && p.isNew(RefOf(r.obj).key(s.ph.Class))
			r.out, r.err = e.applyObject(ctx, p.req, s.ph.Class, s.target, r.obj, isNew, ran)
			var unavailable *TargetUnavailableError
			if errors.As(r.err, &unavailable) {
				stopped.Store(true)
			}
			if r.err == nil && r.out.job != nil {
				// A Job that ran to an end, gone or going: available as it finished, whatever
				// kstatus makes of an object being deleted.
				r.reasons, r.failed = jobReasons(*r.out.job)
			} else if r.err == nil && r.out.live != nil && r.out.waiting == "" && !p.req.DryRun {
				r.reasons, r.failed, r.err = availability(ctx, r.out.live, p.probes)
				if r.err != nil {
					r.err = &availabilityError{err: fmt.Errorf("check availability of %s: %w", RefOf(r.obj), r.err)}
				}
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
			p.found(s, r.obj, r.available())
		}
	}
	return stopped.Load(), errors.Join(errs...)
}

// availabilityError is a failure to evaluate a probe on an object that was applied.
type availabilityError struct{ err error }

func (e *availabilityError) Error() string { return e.err.Error() }
func (e *availabilityError) Unwrap() error { return e.err }

// acquire takes a slot of the step and one of the Engine, false when ctx ends first.
func (e *Engine) acquire(ctx context.Context, slots chan struct{}) bool {
	select {
	case slots <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	if e.inFlight == nil {
		return true
	}
	select {
	case e.inFlight <- struct{}{}:
		return true
	case <-ctx.Done():
		<-slots
		return false
	}
}

func (e *Engine) release(slots chan struct{}) {
	if e.inFlight != nil {
		<-e.inFlight
	}
	<-slots
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
		s.skipped = append(s.skipped, r.obj)
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

// available reports whether applying the object found it available in its desired state, with
// nothing to report: drift left alone is reported by every pass, so it is not available to skip.
func (r *appliedObject) available() bool {
	return r.ran && r.err == nil && r.out.live != nil && r.out.waiting == "" && len(r.reasons) == 0 && r.out.drift == nil
}

// availableBefore reports whether an earlier pass found obj available in its desired state,
// so that this pass need not send or read it. CRDs are always read (the custom resources of
// their phase wait for them to be Established), and so are objects whose conditions the phase
// maps (they are reported from the live object).
func (p *pass) availableBefore(s *phaseState, obj *unstructured.Unstructured) bool {
	if p.progress == nil || len(s.mappings[s.origin[obj]]) > 0 {
		return false
	}
	if _, ok := crdKind(obj); ok {
		return false
	}
	return p.progress.isAvailable(RefOf(obj).key(s.ph.Class), obj.GetAnnotations()[DesiredHashAnnotation])
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

// found remembers whether the pass found obj, which it sent, available in its desired state.
func (p *pass) found(s *phaseState, obj *unstructured.Unstructured, available bool) {
	if p.progress != nil {
		p.progress.found(RefOf(obj).key(s.ph.Class), obj.GetAnnotations()[DesiredHashAnnotation], available)
	}
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

// prepare copies the rendered objects, adds the ownership labels and the desired-state hash, drops
// what apply must not send (status, server-set metadata), and orders CRDs first, then Namespaces, then the rest as rendered.
// origin maps each copy to the index of its object in objs.
func prepare(objs []*unstructured.Unstructured, owner Owner) (out []*unstructured.Unstructured, origin map[*unstructured.Unstructured]int, err error) {
	out = make([]*unstructured.Unstructured, 0, len(objs))
	origin = make(map[*unstructured.Unstructured]int, len(objs))
	for i, o := range objs {
		c, err := canonicalCopy(o)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", RefOf(o), err)
		}
		origin[c] = i
		delete(c.Object, "status")
		for _, f := range []string{"creationTimestamp", "resourceVersion", "uid", "generation", "managedFields"} {
			unstructured.RemoveNestedField(c.Object, "metadata", f)
		}
		labels := c.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		for k, v := range owner.labels() {
			labels[k] = v
		}
		c.SetLabels(labels)
		setDesiredHash(c)
		out = append(out, c)
	}
	sort.SliceStable(out, func(i, j int) bool { return rank(out[i]) < rank(out[j]) })
	return out, origin, nil
}

// rank orders the objects of a phase: CRDs, then Namespaces, then the rest.
func rank(o *unstructured.Unstructured) int {
	switch o.GroupVersionKind().GroupKind() {
	case schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:
		return 0
	case schema.GroupKind{Kind: "Namespace"}:
		return 1
	}
	return 2
}

// canonicalCopy copies an object through JSON. Unlike DeepCopy it accepts any JSON-marshalable
// values (templating and kustomize may produce int or typed maps), and it leaves numbers as
// int64/float64, the types the comparison with live objects expects.
func canonicalCopy(obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return nil, fmt.Errorf("encode object: %w", err)
	}
	c := &unstructured.Unstructured{}
	if err := c.UnmarshalJSON(data); err != nil {
		return nil, fmt.Errorf("decode object: %w", err)
	}
	return c, nil
}

// crdKind returns the group and kind a CustomResourceDefinition defines.
func crdKind(obj *unstructured.Unstructured) (schema.GroupKind, bool) {
	if obj.GroupVersionKind().GroupKind() != (schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}) {
		return schema.GroupKind{}, false
	}
	group, _, _ := unstructured.NestedString(obj.Object, "spec", "group")
	kind, _, _ := unstructured.NestedString(obj.Object, "spec", "names", "kind")
	return schema.GroupKind{Group: group, Kind: kind}, kind != ""
}

func crdEstablished(live *unstructured.Unstructured) bool {
	conditions, _, _ := unstructured.NestedSlice(live.Object, "status", "conditions")
	for _, c := range conditions {
		if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// availability returns why a live object is not available: kstatus must say Current and every
// probe selecting the object must pass. failed says kstatus found it Failed (a Deployment past
// its progress deadline, a Job that failed): the object itself says that waiting will not help,
// and the first reason is kstatus's.
func availability(ctx context.Context, live *unstructured.Unstructured, probes probeSet) (reasons []string, failed bool, err error) {
	res, err := status.Compute(live)
	if err != nil {
		reasons = append(reasons, "kstatus: "+err.Error())
	} else if res.Status != status.CurrentStatus {
		failed = res.Status == status.FailedStatus
		reason := fmt.Sprintf("kstatus %s: %s", res.Status, res.Message)
		if failed {
			reason += failureConditions(live)
		}
		reasons = append(reasons, reason)
	}
	probeReasons, err := probes.evaluate(ctx, live)
	if err != nil {
		return nil, false, err
	}
	return append(reasons, probeReasons...), failed, nil
}

// setDesiredHash stores a hash of the desired object in an annotation. The no-op check compares
// the desired object as a subset of the live one, which cannot see a field the package stopped
// setting; the hash changes with every change of the desired object, removals included, so such
// a revision is applied and server-side apply removes the field.
func setDesiredHash(obj *unstructured.Unstructured) {
	data, err := json.Marshal(obj.Object) // map keys are sorted: stable for equal objects
	if err != nil {
		return // unstructured content always marshals; without a hash only removals go unseen
	}
	sum := sha256.Sum256(data)
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[DesiredHashAnnotation] = hex.EncodeToString(sum[:16])
	obj.SetAnnotations(annotations)
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
