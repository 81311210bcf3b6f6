// Package apply rolls rendered phases out to clusters with server-side apply, one non-blocking pass
// at a time, and tears them down in reverse.
//
// One Engine (engine.go) has a file per verb and per part of a pass:
//
//   - Apply: pass.go (one call: its phases in order, its budgets and resulting inventory),
//     phase.go (a phase, applied step by step, and what each object came to), object.go (one
//     object: read or create, server-side apply, drift), record.go (the intended inventory,
//     written before objects are), progress.go (what earlier passes of the same owner found),
//     availability.go and failure.go (kstatus and the package's probes, compiled by
//     apply/probing), job.go (Jobs that ran once), prepare.go (order within a phase, the desired
//     hash), and the rules an object is held to: confine.go, ownership.go, ignore.go,
//     satisfied.go, condition_map.go.
//   - Prune (prune.go) and Teardown (teardown.go); Preview (preview.go), a dry run.
//
// It imports the API types, desired (rendered phases) and apply/probing (availability probes,
// whose CEL goes through regexcost), nothing of the controller.
package apply
