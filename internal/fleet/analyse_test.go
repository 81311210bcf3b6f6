package fleet

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// After a restart the verdicts in memory are gone: a partition the checks failed is found
// again in status.analysis, so that the halt holds until an evaluation passes.
func TestAFailedAnalysisOutlivesARestart(t *testing.T) {
	t.Parallel()
	since := time.Now().Add(-time.Minute).Truncate(time.Second)
	last := []v1alpha1.FleetCheckStatus{
		{Name: "ready", Partition: "canary", Revision: "rev-2", Result: v1alpha1.FleetCheckPassed},
		{Name: "error-rate", Partition: "canary", Revision: "rev-2", Result: v1alpha1.FleetCheckFailed, Since: metav1.NewTime(since)},
	}
	partition, at, failing := failingPartition(nil, last, "rev-2")
	assert.True(t, failing)
	assert.Equal(t, "canary", partition)
	assert.True(t, at.Equal(since))
	_, _, failing = failingPartition(nil, last, "rev-3")
	assert.False(t, failing, "a verdict on another revision holds nothing")
	_, _, failing = failingPartition(&analysisMemo{partition: "canary", revision: "rev-2"}, last, "rev-2")
	assert.False(t, failing, "memory, when there is some, says it passed since")
}

func TestASoakEndsOnAnEvaluationAtItsEnd(t *testing.T) {
	t.Parallel()
	assert.Equal(t, 30*time.Second, soakOf(nil, 30*time.Second))
	assert.Equal(t, time.Hour, soakOf(&metav1.Duration{Duration: time.Hour}, 30*time.Second))
	assert.Equal(t, 30*time.Second, soakOf(&metav1.Duration{Duration: time.Second}, 30*time.Second))
}
