package controller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

func TestResolveMaxAge(t *testing.T) {
	t.Parallel()
	interval := 10 * time.Minute
	now := time.Date(2025, time.March, 4, 5, 6, 7, 0, time.UTC)
	pkg := func(mutate func(*v1alpha1.Package)) *v1alpha1.Package {
		p := &v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{Generation: 1, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}}
		p.Status.LastAttemptedRevision = "sha256:abc"
		p.Status.ObservedGeneration = 1
		mutate(p)
		return p
	}
	assert.Equal(t, interval/2, resolveMaxAge(pkg(func(*v1alpha1.Package) {}), "", interval, now), "interval reconcile")

	requested := pkg(func(p *v1alpha1.Package) {
		p.Annotations = map[string]string{"reconcile.fluxcd.io/requestedAt": now.Add(-3 * time.Second).Format(time.RFC3339Nano)}
	})
	assert.Equal(t, 3*time.Second, resolveMaxAge(requested, requested.Status.GetLastHandledReconcileRequest(), interval, now), "a resolution made after the request is fresh enough")

	future := pkg(func(p *v1alpha1.Package) {
		p.Annotations = map[string]string{"reconcile.fluxcd.io/requestedAt": now.Add(time.Minute).Format(time.RFC3339Nano)}
	})
	assert.Zero(t, resolveMaxAge(future, future.Status.GetLastHandledReconcileRequest(), interval, now), "a request from a clock ahead of ours asks the registry")

	handled := pkg(func(p *v1alpha1.Package) {
		p.Annotations = map[string]string{"reconcile.fluxcd.io/requestedAt": "token"}
		p.Status.LastHandledReconcileAt = "token"
	})
	assert.Equal(t, interval/2, resolveMaxAge(handled, handled.Status.GetLastHandledReconcileRequest(), interval, now), "an old request is not new")

	odd := pkg(func(p *v1alpha1.Package) {
		p.Annotations = map[string]string{"reconcile.fluxcd.io/requestedAt": "now please"}
	})
	assert.Zero(t, resolveMaxAge(odd, odd.Status.GetLastHandledReconcileRequest(), interval, now), "a request that is not a time asks the registry")

	fresh := pkg(func(p *v1alpha1.Package) {
		p.Status.LastAttemptedRevision = ""
		p.CreationTimestamp = metav1.NewTime(now.Add(-5 * time.Second))
	})
	assert.Equal(t, 4*time.Second, resolveMaxAge(fresh, fresh.Status.GetLastHandledReconcileRequest(), interval, now), "a new resource takes resolutions made since its creation, less the timestamp's second of precision")

	neverResolved := pkg(func(p *v1alpha1.Package) {
		p.Status.LastAttemptedRevision = ""
		p.CreationTimestamp = metav1.NewTime(now.Add(-time.Hour))
	})
	assert.Equal(t, interval/2, resolveMaxAge(neverResolved, neverResolved.Status.GetLastHandledReconcileRequest(), interval, now), "a resource that never resolved (no tag in its range) still sees new tags every interval")

	justCreated := pkg(func(p *v1alpha1.Package) {
		p.Status.LastAttemptedRevision = ""
		p.CreationTimestamp = metav1.NewTime(now)
	})
	assert.Zero(t, resolveMaxAge(justCreated, justCreated.Status.GetLastHandledReconcileRequest(), interval, now), "within the creation second nothing cached is fresh enough")

	changed := pkg(func(p *v1alpha1.Package) {
		p.Generation = 2
		p.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}}
	})
	assert.Zero(t, resolveMaxAge(changed, changed.Status.GetLastHandledReconcileRequest(), interval, now), "a changed spec asks the registry")
}
