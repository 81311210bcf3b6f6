package apply

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

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
