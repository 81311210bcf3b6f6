package fleet

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/client-go/tools/record"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// TestAnnounceWindowHeld: a member that starts waiting for its HostedCluster's window is
// announced once (a Warning when the cluster's annotation cannot be read); one listed so
// before, with the same reason and message, is not announced again.
func TestAnnounceWindowHeld(t *testing.T) {
	t.Parallel()
	recorder := record.NewFakeRecorder(10)
	r := &fleetSteps{recorder: recorder}
	fleet := &v1alpha1.HostedClusterPackage{}
	waiting := v1alpha1.WindowHeldMemberStatus{MemberStatus: v1alpha1.MemberStatus{Namespace: "clusters-a", Reason: v1alpha1.OutsideClusterWindowReason, Message: "closed"}}
	invalid := v1alpha1.WindowHeldMemberStatus{MemberStatus: v1alpha1.MemberStatus{Namespace: "clusters-b", Reason: v1alpha1.InvalidClusterWindowsReason, Message: "cannot be read"}}
	events := func() []string {
		var out []string
		for len(recorder.Events) > 0 {
			out = append(out, <-recorder.Events)
		}
		return out
	}

	r.announceWindowHeld(fleet, nil, []v1alpha1.WindowHeldMemberStatus{waiting, invalid})
	assert.Equal(t, []string{"Normal OutsideClusterWindow member clusters-a: closed", "Warning InvalidClusterWindows member clusters-b: cannot be read"}, events())

	r.announceWindowHeld(fleet, []v1alpha1.WindowHeldMemberStatus{waiting, invalid}, []v1alpha1.WindowHeldMemberStatus{waiting, invalid})
	assert.Empty(t, events(), "nothing changed")

	fixedWrongly := invalid
	fixedWrongly.Message = "cannot be read either"
	r.announceWindowHeld(fleet, []v1alpha1.WindowHeldMemberStatus{waiting, invalid}, []v1alpha1.WindowHeldMemberStatus{waiting, fixedWrongly})
	assert.Equal(t, []string{"Warning InvalidClusterWindows member clusters-b: cannot be read either"}, events())
}

// TestBoundedWindowHeld: the list is bounded as the other member lists are.
func TestBoundedWindowHeld(t *testing.T) {
	t.Parallel()
	var ms []v1alpha1.WindowHeldMemberStatus
	for range maxListedMembers + 5 {
		ms = append(ms, v1alpha1.WindowHeldMemberStatus{MemberStatus: v1alpha1.MemberStatus{Message: strings.Repeat("x", 2*maxMemberMessage)}})
	}
	got := boundedWindowHeld(ms)
	assert.Len(t, got, maxListedMembers)
	assert.LessOrEqual(t, len(got[0].Message), maxMemberMessage)
}
