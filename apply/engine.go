package apply

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

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
}

// Engine applies phases and tears them down. It holds no per-owner state and is safe for
// concurrent use; it caches compiled CEL probes.
type Engine struct {
	fieldManager string
	cel          celCache
}

// NewEngine returns an Engine.
func NewEngine(opts Options) *Engine {
	if opts.FieldManager == "" {
		opts.FieldManager = DefaultFieldManager
	}
	return &Engine{fieldManager: opts.FieldManager}
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
	// recordCtx is the caller's context: Record writes the caller's status, on the management
	// cluster, and must not run under (or use up) a hosted target's budget.
	recordCtx context.Context
}

// intendedRef is an object Record was told about.
type intendedRef struct {
	phase phaseKey
	ref   ObjectRef
}

// recordIntended hands Request.Record the intended inventory when refs holds objects not
// recorded yet.
func (p *pass) recordIntended(ph phaseKey, refs []ObjectRef) error {
	if p.req.Record == nil || p.req.DryRun {
		return nil
	}
	var fresh []ObjectRef
	for _, ref := range refs {
		if !p.recorded[ref.key(ph.class)] {
			fresh = append(fresh, ref)
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
	for _, ref := range fresh {
		b.add(ph.name, ph.class, ref)
	}
	if err := p.req.Record(p.recordCtx, b.build()); err != nil {
		return fmt.Errorf("record the inventory before writing: %w", err)
	}
	for _, ref := range fresh {
		p.recorded[ref.key(ph.class)] = true
		p.intended = append(p.intended, intendedRef{phase: ph, ref: ref})
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
	p := &pass{req: req, res: &Result{}, inv: newInventoryBuilder(), desired: map[key]phaseKey{}, applied: map[key]phaseKey{}, recorded: map[key]bool{}, recordCtx: ctx}
	for _, ph := range req.Previous.Phases {
		for _, ref := range ph.Objects {
			p.recorded[ref.key(ph.Class)] = true
		}
	}
	for _, ph := range req.Phases {
		p.res.Phases = append(p.res.Phases, PhaseResult{Name: ph.Name, Class: ph.Class, State: v1alpha1.PhasePending})
		p.inv.addPhase(ph.Name, ph.Class)
		for _, obj := range ph.Objects {
			p.desired[RefOf(obj).key(ph.Class)] = phaseKey{ph.Name, ph.Class}
		}
	}
	probes, err := compileProbes(req.Probes, &e.cel)
	if err != nil {
		p.res.Inventory = req.Previous
		return p.res, fmt.Errorf("compile availability probes: %w", err)
	}
	p.probes = probes
	if err := checkIgnoreFields(req.IgnoreFields); err != nil {
		p.res.Inventory = req.Previous
		return p.res, err
	}
	if err := checkConfinement(req); err != nil {
		p.res.Inventory = req.Previous
		return p.res, err
	}

	var errs []error
	budgets := map[string]context.Context{}
	for i, ph := range req.Phases {
		pr := &p.res.Phases[i]
		target, ok := req.Targets[ph.Class]
		if !ok || target.Client == nil {
			errs = append(errs, fmt.Errorf("phase %s: %w", ph.Name, &TargetUnavailableError{Class: ph.Class, Err: ErrNoTarget}))
			break
		}
		pr.Target = target.Name
		pctx := ctx
		if target.Budget > 0 {
			if _, ok := budgets[ph.Class]; !ok {
				bctx, cancel := context.WithTimeout(ctx, target.Budget)
				defer cancel()
				budgets[ph.Class] = bctx
			}
			pctx = budgets[ph.Class]
		}
		if err := e.applyPhase(pctx, p, ph, target, pr); err != nil {
			errs = append(errs, fmt.Errorf("phase %s on %s: %w", ph.Name, target.Name, err))
		}
		if pr.State != v1alpha1.PhaseComplete && !req.DryRun {
			break
		}
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
	// Keep tracking what the previous revision applied: objects still desired stay in the phase
	// that now holds them, the others in their old phase until they are pruned.
	for _, ph := range req.Previous.Phases {
		for _, ref := range ph.Objects {
			if pk, ok := p.phaseOf(ph.Class, ref); ok {
				p.inv.add(pk.name, pk.class, ref)
			} else if !pruned[ref.key(ph.Class)] && !req.NoPrune {
				p.inv.add(ph.Name, ph.Class, ref)
			}
		}
	}
	p.res.Inventory = p.inv.build()
	return p.res, errors.Join(errs...)
}

// applyPhase applies the objects of one phase and notes which are not available.
func (e *Engine) applyPhase(ctx context.Context, p *pass, ph desired.Phase, target Target, pr *PhaseResult) error {
	pr.State = v1alpha1.PhaseProgressing
	objs, origin, err := prepare(ph.Objects, p.req.Owner)
	if err != nil {
		return err
	}
	s := &phaseState{ph: ph, key: phaseKey{ph.Name, ph.Class}, target: target, pr: pr, origin: origin,
		mappings: map[int][]desired.ConditionMapping{}, crdOf: map[schema.GroupKind]ObjectRef{}, established: map[schema.GroupKind]bool{}}
	for _, m := range ph.ConditionMappings {
		s.mappings[m.Object] = append(s.mappings[m.Object], m)
	}
	// Custom resources wait for the CRDs of the same phase to be Established.
	for _, obj := range objs {
		if gk, ok := crdKind(obj); ok {
			s.crdOf[gk] = RefOf(obj)
		}
	}
	if err := p.recordPhase(s, objs); err != nil {
		return err
	}
	var errs []error
	for _, obj := range objs {
		stop, err := e.applyInPhase(ctx, p, s, obj)
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
	// origin maps a prepared object to its index in ph.Objects; mappings holds the condition
	// mappings by that index.
	origin   map[*unstructured.Unstructured]int
	mappings map[int][]desired.ConditionMapping
	// crdOf holds the CRDs of the phase by the kind they define; established says which of
	// them the API server reported Established.
	crdOf       map[schema.GroupKind]ObjectRef
	established map[schema.GroupKind]bool
}

// recordPhase records what the phase will create before its first write (objects of kinds the
// cluster does not serve yet are recorded when they are written, by applyInPhase).
func (p *pass) recordPhase(s *phaseState, objs []*unstructured.Unstructured) error {
	var intended []ObjectRef
	for _, obj := range objs {
		if _, waits := s.crdOf[obj.GroupVersionKind().GroupKind()]; waits {
			continue
		}
		err := resolveNamespace(p.req, s.target, obj)
		switch {
		case err == nil:
			intended = append(intended, RefOf(obj))
		case !meta.IsNoMatchError(err) && !errors.Is(err, errNoNamespace):
			// Discovery failed: every further object would wait out the same timeout. Nothing of
			// the phase was written: it is still pending, as it is when its target is missing.
			s.pr.State = v1alpha1.PhasePending
			return unreachable(fmt.Errorf("%s: look up kind: %w", RefOf(obj), err), s.ph.Class, s.target)
		}
	}
	return p.recordIntended(s.key, intended)
}

// applyInPhase applies one object of a phase and checks its availability. stop says the rest
// of the phase must not be tried: the inventory could not be recorded, or the cluster is not
// answering (every further object would wait out its own timeout, holding the caller's worker
// for nothing).
func (e *Engine) applyInPhase(ctx context.Context, p *pass, s *phaseState, obj *unstructured.Unstructured) (stop bool, err error) {
	ref := RefOf(obj)
	gk := obj.GroupVersionKind().GroupKind()
	if crd, ok := s.crdOf[gk]; ok && !s.established[gk] {
		if p.req.DryRun {
			p.res.addChange(ref, ActionCreated) // cannot be validated before its CRD exists
			return false, nil
		}
		s.pr.NotAvailable = append(s.pr.NotAvailable, ObjectStatus{Ref: ref, Reason: "waiting for " + crd.String() + " to be Established"})
		return false, nil
	}
	if resolveNamespace(p.req, s.target, obj) == nil {
		if err := p.recordIntended(s.key, []ObjectRef{RefOf(obj)}); err != nil {
			return true, err
		}
	}
	out, err := e.applyObject(ctx, p.req, s.ph.Class, s.target, obj)
	if err != nil {
		if p.req.DryRun && p.namespaceComesFirst(s.ph.Class, obj, err) {
			p.res.addChange(ref, ActionCreated) // cannot be validated before its namespace exists
			return false, nil
		}
		if !p.req.DryRun && mayHaveWritten(err) && resolveNamespace(p.req, s.target, obj) == nil {
			// The answer was lost, not a refusal: the object may exist now. Track it, so that
			// teardown and prune still find it (they delete only what carries the owner's labels,
			// so an object that was never written costs one lookup).
			p.inv.add(s.ph.Name, s.ph.Class, RefOf(obj))
		}
		var unavailable *TargetUnavailableError
		return errors.As(err, &unavailable), err
	}
	ref = RefOf(obj) // applyObject resolved the namespace
	p.applied[ref.key(s.ph.Class)] = s.key
	if out.action != "" {
		p.res.addChange(ref, out.action)
	}
	p.res.noteDrift(out.drift)
	if gk, ok := crdKind(obj); ok && out.live != nil {
		s.established[gk] = crdEstablished(out.live)
	}
	if p.req.DryRun {
		return false, nil
	}
	p.inv.add(s.ph.Name, s.ph.Class, ref)
	p.res.Conditions = append(p.res.Conditions, mapConditions(out.live, s.mappings[s.origin[obj]])...)
	if out.waiting != "" {
		s.pr.NotAvailable = append(s.pr.NotAvailable, ObjectStatus{Ref: ref, Reason: out.waiting})
		return false, nil
	}
	reasons, err := availability(ctx, out.live, p.probes)
	if err != nil {
		return false, fmt.Errorf("check availability of %s: %w", ref, err)
	}
	for _, r := range reasons {
		s.pr.NotAvailable = append(s.pr.NotAvailable, ObjectStatus{Ref: ref, Reason: r})
	}
	return false, nil
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
	rank := func(o *unstructured.Unstructured) int {
		switch o.GroupVersionKind().GroupKind() {
		case schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:
			return 0
		case schema.GroupKind{Kind: "Namespace"}:
			return 1
		}
		return 2
	}
	sort.SliceStable(out, func(i, j int) bool { return rank(out[i]) < rank(out[j]) })
	return out, origin, nil
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
// probe selecting the object must pass.
func availability(ctx context.Context, live *unstructured.Unstructured, probes probeSet) ([]string, error) {
	var reasons []string
	res, err := status.Compute(live)
	if err != nil {
		reasons = append(reasons, "kstatus: "+err.Error())
	} else if res.Status != status.CurrentStatus {
		reasons = append(reasons, fmt.Sprintf("kstatus %s: %s", res.Status, res.Message))
	}
	probeReasons, err := probes.evaluate(ctx, live)
	if err != nil {
		return nil, err
	}
	return append(reasons, probeReasons...), nil
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
