// Package analysis evaluates a fleet's spec.rollout.analysis while a partition soaks: CEL
// expressions over each member and its HostedCluster, and Prometheus instant queries against
// the operator's Prometheus, each bounded in cost, time and bytes. It says which members a
// check fails and whether every check was conclusive; the fleet's planner turns that into
// failed members and a soak that does not end (internal/fleet/rollout).
package analysis
