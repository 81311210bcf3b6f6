package apply

import (
	"context"
	"errors"
	"fmt"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply/probing"
)

// pass carries the state of one Apply call.
type pass struct {
	req    Request
	probes probing.Prober
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
	// update says the pass changes desired states the last complete pass settled (settled.go),
	// fresh that this pass was less than Request.Interval ago; settled holds what this pass
	// found of each object available in its desired state.
	update, fresh bool
	settled       map[key]settledObject
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
	p.update, p.fresh = p.isUpdate(states)
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
	if len(errs) == 0 && p.res.Complete() && req.Progress != nil && !req.DryRun {
		req.Progress.settle(p.settledAll(states))
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
	if len(errs) > 0 && req.Progress != nil && !req.DryRun {
		req.Progress.forget() // the memory may be what keeps the owner from converging
		p.progress = nil
	}
	p.res.Inventory = p.inventory(pruned)
	return p.res, errors.Join(errs...)
}

// newPass starts a pass of req: every phase pending, what the previous revision recorded, and
// in which phase each desired object is.
func newPass(ctx context.Context, req Request) *pass {
	p := &pass{req: req, res: &Result{}, inv: newInventoryBuilder(), desired: map[key]phaseKey{}, applied: map[key]phaseKey{},
		recorded: map[key]bool{}, previous: map[key]bool{}, refused: map[key]bool{}, recordCtx: ctx,
		ranJobs: jobRuns(req.Previous), jobs: map[key]v1alpha1.InventoryJob{}, settled: map[key]settledObject{}}
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
func (p *pass) check(cache *probing.CELCache) error {
	probes, err := probing.Compile(p.req.Probes, cache)
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
