package fleet

import (
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// TestMemberGateChanged: only what a dependent's gate or a dependency's teardown reads of a
// member wakes them; other status writes (a phase's message, a new lastAppliedRevision time)
// wake nobody.
func TestMemberGateChanged(t *testing.T) {
	t.Parallel()
	base := func() *v1alpha1.Package {
		p := &v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{Name: "network", Namespace: "clusters-a", Generation: 2,
			Annotations: map[string]string{v1alpha1.FleetRevisionAnnotation: "r1"}}}
		p.Status.ObservedGeneration = 2
		p.Status.Conditions = []metav1.Condition{{Type: meta.ReadyCondition, Status: metav1.ConditionFalse, Reason: v1alpha1.PhaseProgressingReason, Message: "phase 1"}}
		return p
	}
	changes := map[string]struct {
		change func(*v1alpha1.Package)
		wakes  bool
	}{
		"Ready status":        {func(p *v1alpha1.Package) { p.Status.Conditions[0].Status = metav1.ConditionTrue }, true},
		"Ready reason":        {func(p *v1alpha1.Package) { p.Status.Conditions[0].Reason = v1alpha1.ApplyFailedReason }, true},
		"Ready condition":     {func(p *v1alpha1.Package) { p.Status.Conditions = nil }, true},
		"generation":          {func(p *v1alpha1.Package) { p.Generation = 3 }, true},
		"observed generation": {func(p *v1alpha1.Package) { p.Status.ObservedGeneration = 1 }, true},
		"revision":            {func(p *v1alpha1.Package) { p.Annotations[v1alpha1.FleetRevisionAnnotation] = "r2" }, true},
		"deletion":            {func(p *v1alpha1.Package) { p.DeletionTimestamp = &metav1.Time{Time: time.Now()} }, true},
		"Ready message":       {func(p *v1alpha1.Package) { p.Status.Conditions[0].Message = "phase 2" }, false},
		"another annotation":  {func(p *v1alpha1.Package) { p.Annotations["note"] = "x" }, false},
	}
	for name, c := range changes {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			changed := base()
			c.change(changed)
			assert.Equal(t, c.wakes, memberGateChanged.Update(event.UpdateEvent{ObjectOld: base(), ObjectNew: changed}))
		})
	}
	assert.False(t, memberGateChanged.Generic(event.GenericEvent{Object: base()}))
}

// TestFleetDependencyChanged: a fleet's change wakes those tied to it by spec.dependsOn only when
// it changes what their gate or teardown reads.
func TestFleetDependencyChanged(t *testing.T) {
	t.Parallel()
	base := func() *v1alpha1.HostedClusterPackage {
		f := dependingFleet("monitoring", "network")
		f.Status.Target = &v1alpha1.FleetRevision{Name: "t1"}
		f.Status.Stable = &v1alpha1.FleetStableRevision{FleetRevision: v1alpha1.FleetRevision{Name: "s1"}}
		return f
	}
	for name, c := range map[string]struct {
		change func(*v1alpha1.HostedClusterPackage)
		wakes  bool
	}{
		"target": {func(f *v1alpha1.HostedClusterPackage) { f.Status.Target.Name = "t2" }, true},
		"rollback": {func(f *v1alpha1.HostedClusterPackage) {
			f.Status.Rejected = &v1alpha1.FleetRejectedRevision{FleetRevision: *f.Status.Target}
		}, true},
		"dependsOn": {func(f *v1alpha1.HostedClusterPackage) {
			f.Spec.DependsOn = append(f.Spec.DependsOn, v1alpha1.FleetDependency{Name: "dns"})
		}, true},
		"selector": {func(f *v1alpha1.HostedClusterPackage) {
			f.Spec.HostedClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}
		}, true},
		"deletion":        {func(f *v1alpha1.HostedClusterPackage) { f.DeletionTimestamp = &metav1.Time{Time: time.Now()} }, true},
		"progress":        {func(f *v1alpha1.HostedClusterPackage) { f.Status.Progress = "1/2/3" }, false},
		"template config": {func(f *v1alpha1.HostedClusterPackage) { f.Spec.Template.Spec.Image = "other:1" }, false},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			changed := base()
			c.change(changed)
			assert.Equal(t, c.wakes, fleetDependencyChanged(base(), changed))
		})
	}
}
