package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// HostedNamespaceRule decides which namespaces are hosted-control-plane namespaces. Only their
// resources may send phases to a hosted cluster: a connector Secret is something anyone who can
// write Secrets in a namespace can create, so its presence proves nothing.
type HostedNamespaceRule string

const (
	// HostedNamespaceByHostedCluster admits a namespace when a HyperShift HostedCluster maps to
	// it (<hostedcluster namespace>-<name>). Creating HostedClusters is for platform
	// administrators, so tenants cannot make their own namespace qualify. The default.
	HostedNamespaceByHostedCluster HostedNamespaceRule = "HostedCluster"
	// HostedNamespaceByLabel admits a namespace labelled
	// hypershift.openshift.io/hosted-control-plane=true, for installations without the
	// HostedCluster API. Safe only where tenants cannot label their own namespaces.
	HostedNamespaceByLabel HostedNamespaceRule = "Label"
)

// hostedControlPlaneLabel is the label HyperShift puts on every hosted-control-plane namespace.
const hostedControlPlaneLabel = "hypershift.openshift.io/hosted-control-plane"

// notHostedError says a resource with hosted-cluster phases lives outside a hosted-control-plane
// namespace.
type notHostedError struct {
	namespace, why string
}

func (e *notHostedError) Error() string {
	return fmt.Sprintf("hosted-cluster phases run only from a hosted-control-plane namespace, and namespace %s is not one: %s; nothing was applied",
		e.namespace, e.why)
}

// admitHosted returns nil when namespace may send phases to a hosted cluster under the rule;
// behind is what findHostedCluster found behind it. A namespace that several HostedClusters map
// to, none of them named by its HostedControlPlane, is refused under either rule: whichever
// cluster the connector Secret reaches, pkgsync cannot tell which HostedCluster it is.
func (r *rollouts) admitHosted(ctx context.Context, namespace string, behind hostedBehind) error {
	if behind.ambiguous != nil {
		return &notHostedError{namespace: namespace, why: behind.ambiguous.Error()}
	}
	switch r.hostedNamespaceRule {
	case HostedNamespaceByLabel:
		var ns corev1.Namespace
		if err := r.apiReader.Get(ctx, client.ObjectKey{Name: namespace}, &ns); err != nil {
			return fmt.Errorf("read namespace %s: %w", namespace, err)
		}
		if ns.Labels[hostedControlPlaneLabel] != "true" {
			return &notHostedError{namespace: namespace, why: fmt.Sprintf("it is not labelled %s=true", hostedControlPlaneLabel)}
		}
		return nil
	default:
		if behind.cluster != nil {
			return nil
		}
		why := "no HyperShift HostedCluster maps to it (HyperShift names a hosted-control-plane namespace <hostedcluster namespace>-<hostedcluster name>)"
		if !r.hostedClustersIndexed {
			why = "the HostedCluster API (hypershift.openshift.io/v1beta1) was not installed when the controller started; start it with --hosted-namespace-rule=Label where only administrators can label namespaces"
		}
		return &notHostedError{namespace: namespace, why: why}
	}
}
