// Package probing decides whether an object is available by the probes a package declares
// (v1alpha1.AvailabilityProbe), in the shape of Package Operator's boxcutter probing package:
// each probe is a small value implementing Prober (Condition, FieldsEqual, CEL), And requires
// every member to pass, and Selector applies a prober only to the objects its group/kind and
// label selector match. Compile turns a manifest's probes into one Prober; CEL rules are
// compiled once per CELCache and each evaluation is bounded in cost. Subset, the comparison
// FieldsEqual makes both ways, is also the one package apply holds desired objects to.
//
// It imports no other pkgsync package except api/v1alpha1 and internal/regexcost.
package probing
