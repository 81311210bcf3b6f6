// Package wakes turns registry notifications (from internal/receiver) into reconciles of the
// Packages, ClusterPackages and HostedClusterPackages that follow the notified repository, and
// into the rule that those reconciles resolve the tag afresh (RegistryWakes). A notification
// wakes and is trusted for nothing else. It imports nothing of the controller: the kinds hand
// it what they follow when their controllers are set up.
package wakes
