// Package reconciler is the one reconcile lifecycle every pkgsync kind runs, and what it
// decides alike for all of them. Lifecycle (made by New from a kind's Steps) gets the
// resource, finalizes it on deletion, adds the finalizer, stops while suspended and runs the
// kind's pass; Report is the one writer of status (through its patcher), of the
// observedGeneration rule, events and metrics; Outcome is how a pass ended, MarkOutcome maps
// it onto Ready, Reconciling and Stalled, and the same outcome says when to come back (Settle,
// the one requeue rule); ReasonFor maps an error of source, render, apply or hosted to a
// condition reason. Options configure the reconcilers.
//
// It imports nothing of the controller's other packages but internal/wakes (Options.Wakes):
// the services the kinds share and the kinds themselves build on it.
package reconciler
