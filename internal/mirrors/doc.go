// Package mirrors gives the source client the mirrors it pulls through: the cluster's
// OpenShift ImageDigestMirrorSets and ImageTagMirrorSets (WatchSets), and the image content
// sources a HostedCluster declares for the packages of its hosted-control-plane namespace
// (OfHostedCluster). It imports nothing of the controller.
package mirrors
