package fleet

import (
	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/fleet/rollout"
	"pkgsync.dev/pkgsync/source"
)

// carryVersion keeps the version learned of the fleet's target (prev) on the target resolved
// anew (next) when that is the same digest: the fleet resolves its tag, it pulls nothing.
func carryVersion(next, prev *v1alpha1.FleetRevision) {
	if next != nil && prev != nil && next.Version == "" && next.Digest == prev.Digest {
		next.Version = prev.Version
	}
}

// learnVersions fills in the version of the target, stable and rejected revisions that have none from
// the members: the first member that reports a version for the digest (status.lastAttempted-
// Version of status.lastAttemptedRevision, which its controller read from the image it pulled).
// What a member's status says is checked as anything from the API server is.
func learnVersions(st *v1alpha1.HostedClusterPackageStatus, members []*rollout.Member) {
	revisions := []*v1alpha1.FleetRevision{st.Target}
	if st.Stable != nil {
		revisions = append(revisions, &st.Stable.FleetRevision)
	}
	if st.Rejected != nil {
		revisions = append(revisions, &st.Rejected.FleetRevision)
	}
	for _, rev := range revisions {
		if rev == nil || rev.Version != "" {
			continue
		}
		for _, m := range members {
			if m.Pkg == nil || m.Pkg.Status.LastAttemptedRevision != rev.Digest {
				continue
			}
			if v := source.CleanVersion(m.Pkg.Status.LastAttemptedVersion); v != "" {
				rev.Version = v
				break
			}
		}
	}
}
