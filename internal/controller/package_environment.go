package controller

import (
	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/render"
)

// +kubebuilder:rbac:groups=config.openshift.io,resources=clusterversions;proxies,verbs=get

// templateEnvironment is what a package's templates see under .environment: the management
// cluster's versions and proxy, and the HostedCluster behind a hosted-control-plane namespace
// with its labels, annotations and node selector (as findHostedCluster read them).
func templateEnvironment(opts Options, hc *hosted.HostedCluster) render.Environment {
	return render.Environment{KubernetesVersion: opts.KubernetesVersion, OpenShiftVersion: opts.OpenShiftVersion, Proxy: opts.Proxy, HostedCluster: templateHostedCluster(hc)}
}

// templateHostedCluster is what templates see of a HostedCluster as .environment.hyperShift.
func templateHostedCluster(hc *hosted.HostedCluster) *render.HostedCluster {
	if hc == nil {
		return nil
	}
	return &render.HostedCluster{Name: hc.Name, Namespace: hc.Namespace, HostedClusterNamespace: hc.ControlPlaneNamespace,
		Labels: hc.Labels, Annotations: hc.Annotations, NodeSelector: hc.NodeSelector, PlatformType: hc.PlatformType}
}
