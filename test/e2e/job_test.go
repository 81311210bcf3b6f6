package e2e

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// jobPackage is a one-phase package of a Job "migrate" running image, which Kubernetes deletes
// ttl seconds after it finished.
func jobPackage(image string, ttl int) map[string]string {
	return map[string]string{
		"manifest.yaml": "apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata:\n  name: migrate\nspec:\n  phases:\n  - name: migrate\n",
		"job.yaml": fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata:
  name: migrate
  annotations:
    pkgsync.dev/phase: migrate
spec:
  ttlSecondsAfterFinished: %d
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: 0
      containers:
      - name: migrate
        image: %q
`, ttl, image),
	}
}

// markJobComplete plays the Job controller, which the suite's bare control plane does not run:
// the Job's one pod started and succeeded, with the conditions the controller writes.
func markJobComplete(t *testing.T, c client.Client, ns, name string) {
	t.Helper()
	eventually(t, func(a *attempt) {
		var job batchv1.Job
		if !assert.NoError(a, c.Get(a.Context(), client.ObjectKey{Namespace: ns, Name: name}, &job)) {
			return
		}
		now := metav1.Now()
		start := metav1.NewTime(now.Add(-time.Second))
		done := func(typ batchv1.JobConditionType) batchv1.JobCondition {
			return batchv1.JobCondition{Type: typ, Status: corev1.ConditionTrue, Reason: "CompletionsReached",
				Message: "Reached expected number of succeeded pods", LastProbeTime: now, LastTransitionTime: now}
		}
		job.Status = batchv1.JobStatus{StartTime: &start, CompletionTime: &now, Succeeded: 1, Ready: ptr.To[int32](0),
			Terminating: ptr.To[int32](0), UncountedTerminatedPods: &batchv1.UncountedTerminatedPods{},
			Conditions: []batchv1.JobCondition{done(batchv1.JobSuccessCriteriaMet), done(batchv1.JobComplete)}}
		assert.NoError(a, c.Status().Update(a.Context(), &job))
	}, "the Job %s/%s completes", ns, name)
}

// deleteJobAsTTLController deletes a Job as the TTL-after-finished controller does, in the
// foreground with its UID as precondition, then plays the garbage collector the bare control
// plane lacks (the Job's pods are gone): it drops the foregroundDeletion finalizer, and waits
// until the Job is gone.
func deleteJobAsTTLController(t *testing.T, c client.Client, ns, name string) {
	t.Helper()
	var job batchv1.Job
	require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &job))
	require.NoError(t, c.Delete(t.Context(), &job, client.Preconditions{UID: &job.UID},
		client.PropagationPolicy(metav1.DeletePropagationForeground)))
	eventually(t, func(a *attempt) {
		var job batchv1.Job
		err := c.Get(a.Context(), client.ObjectKey{Namespace: ns, Name: name}, &job)
		if apierrors.IsNotFound(err) {
			return
		}
		if assert.NoError(a, err) {
			job.Finalizers = nil
			assert.NoError(a, c.Update(a.Context(), &job))
			a.Errorf("Job %s/%s still there", ns, name)
		}
	}, "the Job %s/%s is gone", ns, name)
}

// jobImage returns the image of a Job's container, "" when the Job does not exist.
func jobImage(t testingT, c client.Client, ns, name string) string {
	t.Helper()
	var job batchv1.Job
	err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &job)
	if apierrors.IsNotFound(err) {
		return ""
	}
	require.NoError(t, err)
	return job.Spec.Template.Spec.Containers[0].Image
}

// deleteJobsAtEnd deletes the Jobs left in a namespace when the test ends (cleanNamespace does
// not know the kind): a test that fails before its Package's teardown leaves its Job.
func deleteJobsAtEnd(t *testing.T, c client.Client, ns string) {
	t.Helper()
	t.Cleanup(func() {
		err := c.DeleteAllOf(context.WithoutCancel(t.Context()), &batchv1.Job{}, client.InNamespace(ns),
			client.PropagationPolicy(metav1.DeletePropagationBackground))
		require.NoError(t, client.IgnoreNotFound(err))
	})
}

// TestJobDeletedAfterItFinishedIsNotRunAgain (issue 42): a Job with ttlSecondsAfterFinished that
// completed is deleted, as Kubernetes' TTL-after-finished controller does. The Package, which
// reconciles every second, does not create it again: over several reconciles that read the Job
// (and find it gone) it sends it nothing, and stays Ready all along. A new version of the
// package that changes the Job runs it again.
func TestJobDeletedAfterItFinishedIsNotRunAgain(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	deleteJobsAtEnd(t, suite.mgmtClient, ns)
	repo := "e2e/" + ns + "/migrate"
	pushPackage(t, writePackage(t, jobPackage("migrate:1", 30)), repo+":stable")
	pkg := newPackage(ns, "migrate", suite.registry.Host+"/"+repo+":stable", "")
	pkg.Spec.Interval = &metav1.Duration{Duration: time.Second}
	createPackage(t, pkg)

	markJobComplete(t, suite.mgmtClient, ns, "migrate")
	waitForReady(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	eventually(t, func(a *attempt) {
		readyCondition(a, pkg)
		if assert.NotNil(a, pkg.Status.Inventory) && assert.Len(a, pkg.Status.Inventory.Phases, 1) &&
			assert.Len(a, pkg.Status.Inventory.Phases[0].Jobs, 1) {
			run := pkg.Status.Inventory.Phases[0].Jobs[0]
			assert.Equal(a, "migrate", run.Name)
			assert.Equal(a, v1alpha1.JobComplete, run.Outcome)
			assert.NotEmpty(a, run.DesiredHash)
		}
	}, "status records that the Job ran to completion")

	deleteJobAsTTLController(t, suite.mgmtClient, ns, "migrate")
	before := suite.requests.get(ns)
	var notReady atomic.Value
	const reconciles = 4
	eventually(t, func(a *attempt) {
		if cond := readyCondition(a, pkg); cond != nil && cond.Status != metav1.ConditionTrue {
			notReady.Store(cond.Reason + ": " + cond.Message)
		}
		assert.GreaterOrEqual(a, suite.requests.get(ns)["GET jobs"]-before["GET jobs"], reconciles)
	}, "the Package reconciles %d times, each reading the Job", reconciles)
	after := suite.requests.get(ns)
	assert.Equal(t, before["PATCH jobs"], after["PATCH jobs"], "no apply (create) of the Job")
	assert.Equal(t, before["POST jobs"], after["POST jobs"], "no create of the Job")
	assert.Empty(t, jobImage(t, suite.mgmtClient, ns, "migrate"), "the Job was not created again")
	assert.Nil(t, notReady.Load(), "Ready stayed True")
	assert.Equal(t, metav1.ConditionTrue, readyCondition(t, pkg).Status)

	// A new version whose Job differs runs it again.
	pushPackage(t, writePackage(t, jobPackage("migrate:2", 30)), repo+":stable")
	eventually(t, func(a *attempt) {
		assert.Equal(a, "migrate:2", jobImage(a, suite.mgmtClient, ns, "migrate"))
	}, "the changed Job is created")
}

// jobRuns counts the runs of the Job name in ns that completed, by the events the Job controller
// writes: one Completed per Job object, and so per run.
func jobRuns(t testingT, c client.Client, ns, name string) int {
	t.Helper()
	var events corev1.EventList
	require.NoError(t, c.List(t.Context(), &events, client.InNamespace(ns)))
	n := 0
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == "Job" && e.InvolvedObject.Name == name && e.Reason == "Completed" {
			n++
		}
	}
	return n
}

// TestRealClusterJobWithTTLRunsOnce (issue 42): on a cluster with its controllers, a Job with
// ttlSecondsAfterFinished: 0 runs (KWOK completes its pod), and the TTL-after-finished
// controller deletes it at once, before any reconcile reads it finished. pkgsync created it
// once: over several reconciles that find it gone it sends it nothing, and the Package stays
// Ready. A new version whose Job differs runs it once more, and again not a third time.
func TestRealClusterJobWithTTLRunsOnce(t *testing.T) {
	t.Parallel()
	env := useCluster(t)
	ns := env.namespace(t, nil)
	image := suite.registry.Host + "/e2e/cluster/" + ns + "/migrate:stable"
	digest := pushPackageTo(t, writePackage(t, jobPackage("registry.k8s.io/pause:3.10", 0)), image)
	pkg := newPackage(ns, "migrate", image, "")
	pkg.Spec.Interval = &metav1.Duration{Duration: time.Second}
	env.create(t, pkg)

	runs := func(want int, version string) {
		t.Helper()
		eventuallyFor(t, t.Context(), clusterTimeout, func(a *attempt) {
			assert.Equal(a, want, jobRuns(a, env.client, ns, "migrate"), "runs completed")
			assert.Empty(a, jobImage(a, env.client, ns, "migrate"), "the TTL controller deleted the Job")
		}, "the Job of %s ran and the TTL controller deleted it", version)
		// The Job ran and is gone before pkgsync's next look at it: until then the Package
		// still shows the phase waiting for it. Stability is counted from Ready again, on this
		// version: under load the whole life of the Job can fit between the pass that created
		// it and that pass's status write (waiting for it to start), so the previous version's
		// Ready=True is no start.
		eventuallyFor(t, t.Context(), clusterTimeout, func(a *attempt) {
			if !assert.NoError(a, env.client.Get(a.Context(), client.ObjectKeyFromObject(pkg), pkg)) {
				return
			}
			assert.Equal(a, digest, pkg.Status.LastAppliedRevision, "the version applied")
			if cond := apimeta.FindStatusCondition(pkg.Status.Conditions, "Ready"); assert.NotNil(a, cond) {
				assert.Equal(a, metav1.ConditionTrue, cond.Status, cond.Message)
			}
		}, "the Package is Ready on %s", version)
		before := env.requests.get(ns)
		var notReady atomic.Value
		const reconciles = 4
		eventuallyFor(t, t.Context(), clusterTimeout, func(a *attempt) {
			if !assert.NoError(a, env.client.Get(a.Context(), client.ObjectKeyFromObject(pkg), pkg)) {
				return
			}
			if cond := apimeta.FindStatusCondition(pkg.Status.Conditions, "Ready"); cond == nil || cond.Status != metav1.ConditionTrue {
				notReady.Store(fmt.Sprintf("%v", cond))
			}
			assert.GreaterOrEqual(a, env.requests.get(ns)["GET jobs"]-before["GET jobs"], reconciles)
		}, "the Package reconciles %d times, each reading the Job", reconciles)
		after := env.requests.get(ns)
		assert.Equal(t, want, after["PATCH jobs"], "pkgsync applied (created) the Job once per version")
		assert.Zero(t, after["POST jobs"]+after["PUT jobs"]-before["POST jobs"]-before["PUT jobs"], "no other write to the Job")
		assert.Empty(t, jobImage(t, env.client, ns, "migrate"), "the Job was not created again")
		assert.Equal(t, want, jobRuns(t, env.client, ns, "migrate"), "the Job did not run again")
		assert.Nil(t, notReady.Load(), "Ready stayed True")
	}
	runs(1, "v1")

	digest = pushPackageTo(t, writePackage(t, jobPackage("registry.k8s.io/pause:3.9", 0)), image)
	runs(2, "v2")
}
