package fleet

import (
	"maps"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/event"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// approvals returns the partitions the fleet's approve.pkgsync.dev/<partition> annotations
// approve target for. Only partitions spec.rollout.approvalRequired lists are read: an
// annotation for any other key, or naming another revision, approves nothing.
func approvals(fleet *v1alpha1.HostedClusterPackage, target string) map[string]bool {
	approved := map[string]bool{}
	for _, p := range fleet.Spec.Rollout.ApprovalRequired {
		if fleet.Annotations[v1alpha1.ApprovePartitionPrefix+p] == target {
			approved[p] = true
		}
	}
	return approved
}

// consumeApprovals removes the approvals that name revision, once it is rolled out completely,
// so that the next revision waits for its own. The lifecycle's patcher writes the removal with
// the status (a merge patch setting the keys to null): an approval someone writes anew for the
// same partition between this read and that write is lost, and is given again.
func consumeApprovals(fleet *v1alpha1.HostedClusterPackage, revision string) {
	maps.DeleteFunc(fleet.Annotations, func(k, v string) bool {
		return strings.HasPrefix(k, v1alpha1.ApprovePartitionPrefix) && v == revision
	})
}

// approvalsChanged tells whether an update of a fleet changed its approvals: the fleet's own
// events pass only for a new generation or a reconcile request, and an approval is an
// annotation.
func approvalsChanged(e event.UpdateEvent) bool {
	if e.ObjectOld == nil || e.ObjectNew == nil {
		return false
	}
	of := func(a map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range a {
			if strings.HasPrefix(k, v1alpha1.ApprovePartitionPrefix) {
				out[k] = v
			}
		}
		return out
	}
	return !maps.Equal(of(e.ObjectOld.GetAnnotations()), of(e.ObjectNew.GetAnnotations()))
}
