package fleet

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/fleet/rollout"
)

func TestFleetVersions(t *testing.T) {
	t.Parallel()
	member := func(digest, version string) *rollout.Member {
		p := &v1alpha1.Package{}
		p.Status.LastAttemptedRevision, p.Status.LastAttemptedVersion = digest, version
		return &rollout.Member{Pkg: p}
	}
	t.Run("learned from the first member that reports the digest's version", func(t *testing.T) {
		t.Parallel()
		st := &v1alpha1.HostedClusterPackageStatus{
			Target: &v1alpha1.FleetRevision{Digest: "sha256:b"},
			Stable: &v1alpha1.FleetStableRevision{FleetRevision: v1alpha1.FleetRevision{Digest: "sha256:a"}},
		}
		learnVersions(st, []*rollout.Member{{}, member("sha256:b", ""), member("sha256:a", "1.0.0"), member("sha256:b", "2.0.0"), member("sha256:b", "2.0.1")})
		assert.Equal(t, "2.0.0", st.Target.Version)
		assert.Equal(t, "1.0.0", st.Stable.Version)
	})
	t.Run("a version not fit to show is not learned", func(t *testing.T) {
		t.Parallel()
		st := &v1alpha1.HostedClusterPackageStatus{Target: &v1alpha1.FleetRevision{Digest: "sha256:b"}}
		learnVersions(st, []*rollout.Member{member("sha256:b", "2.0.0\x1b[2J")})
		assert.Empty(t, st.Target.Version)
	})
	t.Run("a version learned is kept", func(t *testing.T) {
		t.Parallel()
		st := &v1alpha1.HostedClusterPackageStatus{Target: &v1alpha1.FleetRevision{Digest: "sha256:b", Version: "2.0.0"}}
		learnVersions(st, []*rollout.Member{member("sha256:b", "9.9.9")})
		assert.Equal(t, "2.0.0", st.Target.Version)
	})
	t.Run("carried to the target resolved anew, for the same digest only", func(t *testing.T) {
		t.Parallel()
		prev := &v1alpha1.FleetRevision{Digest: "sha256:b", Version: "2.0.0"}
		same, other := &v1alpha1.FleetRevision{Digest: "sha256:b"}, &v1alpha1.FleetRevision{Digest: "sha256:c"}
		carryVersion(same, prev)
		carryVersion(other, prev)
		carryVersion(other, nil)
		assert.Equal(t, "2.0.0", same.Version)
		assert.Empty(t, other.Version)
	})
}
