package reconciler

import (
	"fmt"
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

// HostedControlPlaneLabel is the label HyperShift puts on every hosted-control-plane namespace.
const HostedControlPlaneLabel = "hypershift.openshift.io/hosted-control-plane"

// NotHostedError says a resource with hosted-cluster phases lives outside a hosted-control-plane
// namespace.
type NotHostedError struct {
	Namespace, Why string
}

func (e *NotHostedError) Error() string {
	return fmt.Sprintf("hosted-cluster phases run only from a hosted-control-plane namespace, and namespace %s is not one: %s; nothing was applied",
		e.Namespace, e.Why)
}
