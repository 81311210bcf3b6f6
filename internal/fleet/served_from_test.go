package fleet

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/fleet/rollout"
)

// TestTargetAppliedFrom: the fleet lists where the members that applied the target read it,
// once each, sorted; members on another revision, or not yet applied, do not count.
func TestTargetAppliedFrom(t *testing.T) {
	t.Parallel()
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	member := func(revision, applied, from string) *rollout.Member {
		p := &v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{v1alpha1.FleetRevisionAnnotation: revision}}}
		p.Spec.Image = "quay.io/team/app:v1@" + digest
		p.Status.LastAppliedRevision, p.Status.LastAppliedFrom = applied, from
		return &rollout.Member{Pkg: p}
	}
	members := []*rollout.Member{
		member("target", digest, "z.example.com/team/app"),
		member("target", digest, "a.example.com/team/app"),
		member("target", digest, "a.example.com/team/app"),
		member("target", digest, ""),
		member("target", "sha256:old", "old.example.com/team/app"),
		member("stable", digest, "stable.example.com/team/app"),
		{},
	}
	assert.Equal(t, []string{"a.example.com/team/app", "z.example.com/team/app"}, targetAppliedFrom(members, "target"))
	assert.Empty(t, targetAppliedFrom(members[3:4], "target"))
}
