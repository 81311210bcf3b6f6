// Command demo is `make demo`: it starts a registry, a management and a hosted control plane,
// pushes the example package, runs the controller and narrates a rollout, an update and a prune.
package main
