package apply_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/desired"
)

// job is a Job as a package holds it, running image; ttl, when not nil, is its
// ttlSecondsAfterFinished.
func (e *env) job(t *testing.T, name, image string, ttl *int) *unstructured.Unstructured {
	t.Helper()
	ttlLine := ""
	if ttl != nil {
		ttlLine = fmt.Sprintf("\n  ttlSecondsAfterFinished: %d", *ttl)
	}
	return e.obj(t, fmt.Sprintf(`
apiVersion: batch/v1
kind: Job
metadata: {name: %s, namespace: NS}
spec:%s
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: migrate, image: %q}
`, name, ttlLine, image))
}

// Job outcomes writeJobStatus plays.
const (
	jobRunning  = ""
	jobComplete = "Complete"
	jobFailed   = "Failed"
)

// writeJobStatus plays the Job controller, which envtest does not run: the Job's pod started
// and, for jobComplete or jobFailed, finished so, with the conditions the controller writes
// (SuccessCriteriaMet or FailureTarget first, then Complete or Failed).
func writeJobStatus(t *testing.T, c client.Client, ns, name, outcome string) {
	t.Helper()
	job := &unstructured.Unstructured{}
	job.SetAPIVersion("batch/v1")
	job.SetKind("Job")
	require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, job))
	start := time.Now().UTC().Add(-time.Second).Format(time.RFC3339)
	now := time.Now().UTC().Format(time.RFC3339)
	condition := func(typ, reason, message string) map[string]any {
		return map[string]any{"type": typ, "status": "True", "reason": reason, "message": message,
			"lastProbeTime": now, "lastTransitionTime": now}
	}
	status := map[string]any{"startTime": start, "ready": int64(0), "terminating": int64(0)}
	switch outcome {
	case jobRunning:
		status["active"] = int64(1)
	case jobComplete:
		status["succeeded"] = int64(1)
		status["completionTime"] = now
		status["uncountedTerminatedPods"] = map[string]any{}
		status["conditions"] = []any{
			condition("SuccessCriteriaMet", "CompletionsReached", "Reached expected number of succeeded pods"),
			condition("Complete", "CompletionsReached", "Reached expected number of succeeded pods"),
		}
	case jobFailed:
		status["failed"] = int64(1)
		status["uncountedTerminatedPods"] = map[string]any{}
		status["conditions"] = []any{
			condition("FailureTarget", "BackoffLimitExceeded", "Job has reached the specified backoff limit"),
			condition("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit"),
		}
	}
	job.Object["status"] = status
	require.NoError(t, c.Status().Update(t.Context(), job))
}

// deleteAsTTLController deletes a Job as the TTL-after-finished controller does: in the
// foreground, with the Job's UID as precondition. whileDeleting runs while the Job is being
// deleted; then the test plays the garbage collector, which envtest does not run: the Job's pods
// are gone, so it drops the foregroundDeletion finalizer and the Job goes.
func deleteAsTTLController(t *testing.T, c client.Client, like *unstructured.Unstructured, whileDeleting func()) {
	t.Helper()
	job, ok := get(t, c, like)
	require.True(t, ok, "the Job exists before it is deleted")
	require.NoError(t, c.Delete(t.Context(), job, client.Preconditions{UID: ptr.To(job.GetUID())},
		client.PropagationPolicy(metav1.DeletePropagationForeground)))
	if whileDeleting != nil {
		whileDeleting()
	}
	job, ok = get(t, c, like)
	require.True(t, ok, "a foreground deletion waits for the garbage collector")
	job.SetFinalizers(nil)
	require.NoError(t, c.Update(t.Context(), job))
	_, ok = get(t, c, like)
	require.False(t, ok, "the Job is gone")
}

// TestFinishedJobIsNotRunAgain (issue 42): a Job with ttlSecondsAfterFinished is deleted by
// Kubernetes once it finished. pkgsync creates it again only when nothing says it ran for the
// desired state: a Job a pass read finished, or one with a TTL a pass found created, is not
// created again while the package desires the same Job, and counts as it finished (complete:
// available; failed: failed); a Job without a TTL deleted while it ran is created again, as any
// deleted object is; a changed Job runs again.
func TestFinishedJobIsNotRunAgain(t *testing.T) {
	t.Parallel()
	ttl := ptr.To(30)
	cases := []struct {
		name string
		ttl  *int
		// outcome is what the pass before the deletion read of the Job.
		outcome string
		// readWhileDeleting makes a pass while the Job is being deleted.
		readWhileDeleting bool
		// recreated: the passes after the deletion create the Job again.
		recreated bool
	}{
		{name: "complete, then deleted by hand", outcome: jobComplete},
		{name: "complete, read while the TTL controller deletes it", ttl: ttl, outcome: jobComplete, readWhileDeleting: true},
		{name: "failed, then deleted: still failed", ttl: ttl, outcome: jobFailed},
		{name: "with a TTL, gone before a pass read it finished", ttl: ttl, outcome: jobRunning},
		{name: "without a TTL, deleted while it ran: created again", outcome: jobRunning, recreated: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			cfg, counter := countingConfig(management.Config)
			e.targets[""] = apply.Target{Client: newClient(t, cfg), Name: "management cluster"}
			engine := apply.NewEngine(apply.Options{})
			job := e.job(t, "migrate", "migrate:1", tc.ttl)
			req := apply.Request{Owner: e.owner, Targets: e.targets,
				Phases: []desired.Phase{{Name: "migrate", Objects: []*unstructured.Unstructured{job}}}}
			pass := func() *apply.Result {
				t.Helper()
				res, err := engine.Apply(t.Context(), req)
				require.NoError(t, err)
				req.Previous = res.Inventory
				return res
			}

			res := pass()
			require.Equal(t, 1, res.Created)
			assert.False(t, res.Complete(), "a Job not started yet is in progress")
			writeJobStatus(t, e.mgmt, e.ns, "migrate", tc.outcome)
			res = pass()
			if tc.outcome == jobFailed {
				require.Len(t, res.Failed(), 1, res.Summary())
			} else {
				require.True(t, res.Complete(), res.Summary())
			}

			deleteAsTTLController(t, e.mgmt, job, func() {
				if tc.readWhileDeleting {
					res := pass()
					assert.True(t, res.Complete(), "a finished Job being deleted is finished, not waited for: %s", res.Summary())
				}
			})
			counter.reset()
			for range 3 {
				res = pass()
				switch {
				case tc.recreated:
					assert.False(t, res.Complete(), "the Job created again has not started: %s", res.Summary())
				case tc.outcome == jobFailed:
					if assert.Len(t, res.Failed(), 1, res.Summary()) {
						assert.Contains(t, res.Failed()[0].Reason, "failed")
					}
				default:
					assert.True(t, res.Complete(), res.Summary())
				}
			}
			_, exists := get(t, e.mgmt, job)
			writes := counter.reset()
			if tc.recreated {
				assert.True(t, exists, "created again")
				return
			}
			assert.False(t, exists, "not created again")
			assert.Zero(t, writes["PATCH"]+writes["POST"]+writes["PUT"], "no write to the Job in 3 passes: %v", writes)

			dry := req
			dry.DryRun = true
			res, err := engine.Apply(t.Context(), dry)
			require.NoError(t, err)
			assert.Zero(t, res.Created, "a dry run does not show it created: %v", res.Changes)

			// A new revision of the Job runs it again.
			req.Phases[0].Objects[0] = e.job(t, "migrate", "migrate:2", tc.ttl)
			res = pass()
			assert.Equal(t, 1, res.Created, res.Summary())
			live, exists := get(t, e.mgmt, job)
			require.True(t, exists, "a changed Job runs again")
			containers, _, _ := unstructured.NestedSlice(live.Object, "spec", "template", "spec", "containers")
			assert.Equal(t, "migrate:2", containers[0].(map[string]any)["image"])
		})
	}
}

// TestJobRecordedButNotCreatedIsCreated: a Job the inventory holds only because a pass
// recorded it before writing (Request.Record), whose creation was refused or never sent, did
// not run: being in the inventory is no record of a run, even with a TTL.
func TestJobRecordedButNotCreatedIsCreated(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	engine := apply.NewEngine(apply.Options{})
	job := e.job(t, "migrate", "migrate:1", ptr.To(0))
	res, err := engine.Apply(t.Context(), apply.Request{Owner: e.owner, Targets: e.targets,
		Phases:   []desired.Phase{{Name: "migrate", Objects: []*unstructured.Unstructured{job}}},
		Previous: apply.Inventory{Phases: []apply.InventoryPhase{{Name: "migrate", Objects: []apply.ObjectRef{apply.RefOf(job)}}}}})
	require.NoError(t, err)
	assert.Equal(t, 1, res.Created)
	_, exists := get(t, e.mgmt, job)
	assert.True(t, exists)
}

// TestFinishedJobGoneIsPrunedAndTornDown: a finished Job the TTL controller deleted is already
// gone; the revision that drops it from the package prunes nothing and forgets it, and
// teardown finishes.
func TestFinishedJobGoneIsPrunedAndTornDown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	engine := apply.NewEngine(apply.Options{})
	job := e.job(t, "migrate", "migrate:1", ptr.To(0))
	cm := e.configMap(t, "settings", nil)
	req := apply.Request{Owner: e.owner, Targets: e.targets,
		Phases: []desired.Phase{{Name: "migrate", Objects: []*unstructured.Unstructured{job, cm}}}}
	res, err := engine.Apply(t.Context(), req)
	require.NoError(t, err)
	req.Previous = res.Inventory
	writeJobStatus(t, e.mgmt, e.ns, "migrate", jobComplete)
	deleteAsTTLController(t, e.mgmt, job, nil)
	res, err = engine.Apply(t.Context(), req)
	require.NoError(t, err)
	require.True(t, res.Complete(), res.Summary())
	require.Equal(t, 2, res.Inventory.Len(), "the gone Job stays tracked while the package holds it")
	withJob := res.Inventory

	req.Previous = res.Inventory
	req.Phases[0].Objects = []*unstructured.Unstructured{e.configMap(t, "settings", nil)}
	res, err = engine.Apply(t.Context(), req)
	require.NoError(t, err)
	require.True(t, res.Complete(), res.Summary())
	assert.Zero(t, res.Pruned, "nothing to delete: the Job is gone")
	assert.Equal(t, 1, res.Inventory.Len(), "the Job that left the package is forgotten")

	teardown, err := engine.Teardown(t.Context(), apply.TeardownRequest{Owner: e.owner, Targets: e.targets, Inventory: withJob})
	require.NoError(t, err)
	assert.True(t, teardown.Done(), "a gone Job is torn down")
}
