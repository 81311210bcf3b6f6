// Package reconcilertest asserts, for the tests of every kind, what an outcome leaves of
// Ready, Reconciling and Stalled (Conditions, AssertConditions).
package reconcilertest
