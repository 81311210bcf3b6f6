package main

import (
	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/render"
)

// applyReport is apply's result as -o json and -o yaml print it, once the passes end: what
// every pass changed (with --dry-run=server: would change) and where the phases of the last pass
// stand. Scripts depend on it.
type applyReport struct {
	// DryRun is server or client, empty when changes were made.
	DryRun   string `json:"dryRun,omitempty"`
	Complete bool   `json:"complete"`
	// Changes lists the objects the passes created or configured, in order (every object of a
	// dry run, as it would change; a client dry run's without an action).
	Changes []applyChange `json:"changes"`
	Phases  []applyPhase  `json:"phases"`
}

type applyChange struct {
	Object string `json:"object"`
	Action string `json:"action,omitempty"`
}

type applyPhase struct {
	Name    string `json:"name"`
	Cluster string `json:"cluster,omitempty"`
	State   string `json:"state"`
	// Waiting lists the objects not available yet, and why.
	Waiting []applyWaiting `json:"waiting,omitempty"`
}

type applyWaiting struct {
	Object string `json:"object"`
	Reason string `json:"reason"`
	Failed bool   `json:"failed,omitempty"`
}

func newApplyReport(dryRun string) *applyReport {
	r := &applyReport{Changes: []applyChange{}, Phases: []applyPhase{}}
	if dryRun != dryRunNone {
		r.DryRun = dryRun
	}
	return r
}

// add records a pass: its changes, and its phases as the ones that stand.
func (r *applyReport) add(res *apply.Result, dryRun bool) {
	for _, c := range res.Changes {
		if c.Action != apply.ActionUnchanged || dryRun {
			r.Changes = append(r.Changes, applyChange{Object: c.Ref.String(), Action: string(c.Action)})
		}
	}
	r.Phases = r.Phases[:0]
	for _, p := range res.Phases {
		ph := applyPhase{Name: p.Name, Cluster: p.Target, State: string(p.State)}
		for _, s := range p.NotAvailable {
			ph.Waiting = append(ph.Waiting, applyWaiting{Object: s.Ref.String(), Reason: s.Reason, Failed: s.Failed})
		}
		r.Phases = append(r.Phases, ph)
	}
	r.Complete = res.Complete()
}

// addClientDryRun records the objects of every phase as rendered, which a client dry run lists.
func (r *applyReport) addClientDryRun(rendered *render.Result) {
	for _, p := range rendered.Phases {
		ph := applyPhase{Name: p.Name, State: "Pending"}
		for _, obj := range p.Objects {
			r.Changes = append(r.Changes, applyChange{Object: apply.RefOf(obj).String()})
		}
		r.Phases = append(r.Phases, ph)
	}
}
