package reconciler

import (
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// TestAnnounceOneRule: the event of a change of Ready, alike for every kind: Normal for success
// and for progress without trouble, Warning otherwise, nothing when status and reason stay.
func TestAnnounceOneRule(t *testing.T) {
	t.Parallel()
	ready := func(status metav1.ConditionStatus, reason string) *metav1.Condition {
		return &metav1.Condition{Type: meta.ReadyCondition, Status: status, Reason: reason, Message: "m"}
	}
	tests := []struct {
		name string
		obj  Object
		old  *metav1.Condition
		now  *metav1.Condition
		want string // "" for no event
	}{
		{"a Package succeeds", &v1alpha1.Package{}, nil, ready(metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason), "Normal ReconciliationSucceeded m"},
		{"a phase progresses", &v1alpha1.Package{}, nil, ready(metav1.ConditionFalse, v1alpha1.PhaseProgressingReason), "Normal PhaseProgressing m"},
		{"a Package is deleted", &v1alpha1.Package{}, nil, ready(metav1.ConditionFalse, v1alpha1.DeletingReason), "Normal Deleting m"},
		{"a fleet is deleted", &v1alpha1.HostedClusterPackage{}, nil, ready(metav1.ConditionFalse, v1alpha1.DeletingReason), "Normal Deleting m"},
		{"a rollout is paused", &v1alpha1.HostedClusterPackage{}, nil, ready(metav1.ConditionFalse, v1alpha1.RolloutPausedReason), "Normal RolloutPaused m"},
		{"an apply fails", &v1alpha1.Package{}, ready(metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason), ready(metav1.ConditionFalse, v1alpha1.ApplyFailedReason), "Warning ApplyFailed m"},
		{"members fail", &v1alpha1.HostedClusterPackage{}, nil, ready(metav1.ConditionFalse, v1alpha1.MembersFailedReason), "Warning MembersFailed m"},
		{"a new message is no transition", &v1alpha1.Package{}, ready(metav1.ConditionFalse, v1alpha1.ApplyFailedReason), ready(metav1.ConditionFalse, v1alpha1.ApplyFailedReason), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := record.NewFakeRecorder(1)
			conditions.Set(tt.obj, tt.now)
			announce(rec, tt.obj, tt.old)
			select {
			case got := <-rec.Events:
				assert.Equal(t, tt.want, got)
			default:
				assert.Empty(t, tt.want, "an event")
			}
		})
	}
}
