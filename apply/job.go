package apply

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// A Job runs once per desired state. Kubernetes deletes a Job that finished once its
// spec.ttlSecondsAfterFinished has passed (the TTL-after-finished controller); created again as
// any deleted object is, it would run again at every pass, its phase flapping between waiting
// for it to start and available. So the inventory records, for each Job, the desired-state hash
// (DesiredHashAnnotation) of the Job a pass found live, created or read, and how it finished once
// a pass read it finished (v1alpha1.InventoryJob). A Job gone while the record holds the hash
// desired now is not created again when
//   - a pass read it finished, Complete or Failed: whoever deleted it, it ran; or
//   - it has a ttlSecondsAfterFinished: only the TTL controller deletes Jobs by itself, and only
//     finished ones. A pass may never read such a Job finished: kstatus counts a Job available
//     once it started, so the passes do not wait for it to finish, and a TTL shorter than the
//     owner's interval removes it between two passes (as Flux's health checks, pkgsync then
//     takes the Job's absence as its end).
//
// Otherwise (no record, another hash, or a Job without a TTL deleted before a pass read it
// finished) it is created again, as any deleted object is. Being in the inventory is no record
// of a run: Record lists objects before they are written, and their creation may be refused.
//
// A gone Job counts as it finished: Complete, or finished unseen, keeps its phase available;
// Failed keeps it failed (ObjectsFailed), as the live Job did: retries are the Job's own
// (backoffLimit), and creating a failed Job again at every pass is the loop this prevents. A new
// revision of the Job (another hash) runs it again. Whoever may delete the Job can so keep it
// from running again in the same desired state, which is what the TTL controller does anyway,
// and make a Job with a TTL deleted while it runs count as finished: its phase was available
// already, since it started. The record cannot make pkgsync skip a Job of another desired state.

// jobKind is the kind of Kubernetes Jobs.
var jobKind = schema.GroupKind{Group: "batch", Kind: "Job"}

func isJob(obj *unstructured.Unstructured) bool {
	return obj.GroupVersionKind().GroupKind() == jobKind
}

// jobKey is the key of the Job a record names, on the cluster of a phase class.
func jobKey(class string, run v1alpha1.InventoryJob) key {
	return key{class, jobKind.Group, jobKind.Kind, run.Namespace, run.Name}
}

// jobOutcome reads from a live Job's conditions how it finished, empty while it has not.
func jobOutcome(live *unstructured.Unstructured) v1alpha1.JobOutcome {
	conditions, _, _ := unstructured.NestedSlice(live.Object, "status", "conditions")
	for _, c := range conditions {
		m, ok := c.(map[string]any)
		if !ok || m["status"] != "True" {
			continue
		}
		switch m["type"] {
		case string(v1alpha1.JobComplete):
			return v1alpha1.JobComplete
		case string(v1alpha1.JobFailed):
			return v1alpha1.JobFailed
		}
	}
	return ""
}

// hasTTL reports whether a desired Job asks Kubernetes to delete it once it finished.
func hasTTL(desired *unstructured.Unstructured) bool {
	ttl, found, _ := unstructured.NestedFieldNoCopy(desired.Object, "spec", "ttlSecondsAfterFinished")
	return found && ttl != nil
}

// jobRunOf returns the record of a live Job that runs or ran in the desired state: it carries
// the desired state's hash.
func jobRunOf(desired, live *unstructured.Unstructured) (v1alpha1.InventoryJob, bool) {
	hash := desiredHashOf(desired)
	if !isJob(desired) || hash == "" || desiredHashOf(live) != hash {
		return v1alpha1.InventoryJob{}, false
	}
	return v1alpha1.InventoryJob{Namespace: live.GetNamespace(), Name: live.GetName(), DesiredHash: hash, Outcome: jobOutcome(live)}, true
}

// ranToEnd reports whether a record says the desired Job ran in its desired state to an end:
// once gone, it is not created again.
func ranToEnd(run v1alpha1.InventoryJob, desired *unstructured.Unstructured) bool {
	hash := desiredHashOf(desired)
	return hash != "" && run.DesiredHash == hash && (run.Outcome != "" || hasTTL(desired))
}

// ranBefore returns the record of an earlier pass saying the desired Job (its namespace
// resolved) ran in its desired state to an end, nil when there is none.
func ranBefore(runs map[key]v1alpha1.InventoryJob, class string, desired *unstructured.Unstructured) *v1alpha1.InventoryJob {
	if !isJob(desired) {
		return nil
	}
	run, ok := runs[RefOf(desired).key(class)]
	if !ok || !ranToEnd(run, desired) {
		return nil
	}
	return &run
}

// jobRuns indexes the Job records of an inventory by the Job they name.
func jobRuns(inv Inventory) map[key]v1alpha1.InventoryJob {
	runs := map[key]v1alpha1.InventoryJob{}
	for _, ph := range inv.Phases {
		for _, run := range ph.Jobs {
			runs[jobKey(ph.Class, run)] = run
		}
	}
	return runs
}

// jobReasons says why a Job that ran to an end and is gone (or going) is not available: a
// failed one stays failed.
func jobReasons(run v1alpha1.InventoryJob) (reasons []string, failed bool) {
	if run.Outcome == v1alpha1.JobFailed {
		return []string{"Job failed in this desired state and was deleted since; it is not run again until the package changes it"}, true
	}
	return nil, false
}

// noteJob records how the pass found a desired Job: a record of an earlier pass it relied on,
// or the live Job in its desired state.
func (p *pass) noteJob(s *phaseState, r *appliedObject) {
	if !isJob(r.obj) {
		return
	}
	k := RefOf(r.obj).key(s.ph.Class)
	switch {
	case r.out.job != nil:
		p.jobs[k] = *r.out.job
	case r.out.live != nil:
		if run, ok := jobRunOf(r.obj, r.out.live); ok {
			p.jobs[k] = run
		}
	}
}

// addJobs gives an inventory being built the Job records to keep: those of Previous for Jobs
// the package still holds, and those this pass made, which replace them.
func (p *pass) addJobs(b *inventoryBuilder) {
	for k, run := range p.ranJobs {
		if _, ok := p.phaseOf(k.class, ObjectRef{Group: k.group, Kind: k.kind, Namespace: k.namespace, Name: k.name}); ok {
			b.jobs[k] = run
		}
	}
	for k, run := range p.jobs {
		b.jobs[k] = run
	}
}
