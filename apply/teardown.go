package apply

import (
	"context"
	"fmt"
)

// TeardownRequest removes what an owner applied.
type TeardownRequest struct {
	Owner Owner
	// Inventory is the last inventory an Apply or Teardown returned.
	Inventory Inventory
	Targets   map[string]Target
}

// TeardownResult is the outcome of one teardown pass.
type TeardownResult struct {
	// Phase is the phase being deleted, empty when done.
	Phase string
	// Remaining lists the objects of Phase that still exist.
	Remaining []ObjectRef
	// Deleted counts the delete requests sent in this pass.
	Deleted int
	// Inventory is what is left to tear down; store it and pass it to the next Teardown.
	Inventory Inventory
}

// Done reports whether every object is gone or left to another owner.
func (r *TeardownResult) Done() bool { return len(r.Inventory.Phases) == 0 }

// Teardown makes one non-blocking pass deleting the inventory in reverse phase order: a phase is
// touched only once every object of the later phases is gone. Objects that no longer carry the
// owner's labels are left alone. The caller requeues until Done. The result is returned even with
// an error; a *TargetUnavailableError names a cluster that cannot be reached.
func (e *Engine) Teardown(ctx context.Context, req TeardownRequest) (*TeardownResult, error) {
	phases := req.Inventory.Phases
	res := &TeardownResult{}
	for i := len(phases) - 1; i >= 0; i-- {
		ph := phases[i]
		res.Inventory = Inventory{Phases: phases[:i+1]}
		res.Phase = ph.Name
		t, ok := req.Targets[ph.Class]
		if !ok || t.Client == nil {
			return res, fmt.Errorf("tear down phase %s: %w", ph.Name, &TargetUnavailableError{Class: ph.Class, Err: ErrNoTarget})
		}
		var remaining []ObjectRef
		for j := len(ph.Objects) - 1; j >= 0; j-- {
			ref := ph.Objects[j]
			deleted, gone, err := deleteOwned(ctx, t, ph.Class, req.Owner, ref)
			if err != nil {
				return res, fmt.Errorf("tear down phase %s on %s: %w", ph.Name, t.Name, err)
			}
			if deleted {
				res.Deleted++
				// Objects without finalizers are gone right away; look once more so that a
				// phase of plain objects finishes in one pass.
				if _, gone, err = getMetadata(ctx, t, ph.Class, ref); err != nil {
					return res, fmt.Errorf("tear down phase %s on %s: %w", ph.Name, t.Name, err)
				}
			}
			if !gone {
				remaining = append([]ObjectRef{ref}, remaining...)
			}
		}
		if len(remaining) > 0 {
			left := append([]InventoryPhase{}, phases[:i]...)
			res.Inventory = Inventory{Phases: append(left, InventoryPhase{Name: ph.Name, Class: ph.Class, Objects: remaining})}
			res.Remaining = remaining
			return res, nil
		}
	}
	return &TeardownResult{Deleted: res.Deleted}, nil
}
