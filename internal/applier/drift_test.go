package applier

import (
	"fmt"
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
)

func TestDriftReportTransitions(t *testing.T) {
	t.Parallel()
	pkg := &v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	rec := record.NewFakeRecorder(10)
	d := driftReport{recorder: rec, kind: v1alpha1.PackageKind}
	ref := apply.ObjectRef{Version: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "two"}
	left := &apply.Result{Drift: []apply.Drift{{Ref: ref, Paths: []string{"/data/name"}}}}

	d.Record(pkg, &pkg.Status.ApplyStatus, v1alpha1.DriftReport, left)
	c := conditions.Get(pkg, v1alpha1.DriftedCondition)
	require.NotNil(t, c)
	assert.Equal(t, metav1.ConditionTrue, c.Status)
	assert.Equal(t, "1 object drifted and was left as it is (driftPolicy Report): ConfigMap ns/two (/data/name)", c.Message)
	assert.Equal(t, &v1alpha1.DriftStatus{Count: 1, Objects: []v1alpha1.DriftedObject{{Object: "ConfigMap ns/two", Paths: []string{"/data/name"}}}}, pkg.Status.Drift)
	assert.Len(t, rec.Events, 1)

	d.Record(pkg, &pkg.Status.ApplyStatus, v1alpha1.DriftReport, left)
	assert.Len(t, rec.Events, 1, "the same drift again: no event")
	d.Record(pkg, &pkg.Status.ApplyStatus, v1alpha1.DriftReport, nil)
	assert.NotNil(t, pkg.Status.Drift, "a pass that did not run changes nothing")

	corrected := &apply.Result{Drift: []apply.Drift{{Ref: ref, Paths: []string{"/data/name"}, Corrected: true}}}
	d.Record(pkg, &pkg.Status.ApplyStatus, v1alpha1.DriftCorrect, corrected)
	assert.Nil(t, pkg.Status.Drift)
	assert.Nil(t, conditions.Get(pkg, v1alpha1.DriftedCondition))
	require.Len(t, rec.Events, 2)
	assert.Contains(t, <-rec.Events, "Warning DriftDetected")
	assert.Contains(t, <-rec.Events, "Normal DriftResolved")
}

func TestDriftStatusIsBounded(t *testing.T) {
	t.Parallel()
	var left []apply.Drift
	for i := range 25 {
		left = append(left, apply.Drift{Ref: apply.ObjectRef{Version: "v1", Kind: "ConfigMap", Namespace: "ns", Name: fmt.Sprint(i)}, Paths: []string{"/data/a"}, More: 2})
	}
	s := driftToStatus(left)
	assert.Equal(t, int32(25), s.Count)
	assert.Len(t, s.Objects, maxDriftedObjects)
	assert.Equal(t, int32(2), s.Objects[0].MorePaths)
	msg := driftMessage(left)
	assert.Contains(t, msg, "25 objects drifted")
	assert.Contains(t, msg, "ConfigMap ns/0 (/data/a and 2 more)")
	assert.Contains(t, msg, "and 22 more (status.drift)")
}
