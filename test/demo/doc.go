// Command demo is `make demo`: it starts a registry, a management cluster with its controllers and
// simulated nodes, and a hosted control plane,
// pushes the example package, runs the controller and narrates a rollout, an update and a prune.
package main
