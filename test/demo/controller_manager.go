package main

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/apply"
)

// deploymentHold is how long a new Deployment generation stays unavailable before the stand-in
// kube-controller-manager reports it rolled out: long enough to see the next phase wait.
const deploymentHold = 3 * time.Second

// playControllerManager does, for Deployments pkgsync created on the management cluster, the one
// thing kube-controller-manager would: report them rolled out. The control planes here run
// only kube-apiserver and etcd, so without this a Deployment would never become available.
func (d *demo) playControllerManager(ctx context.Context, c client.Client) {
	firstSeen := map[string]time.Time{}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		var list appsv1.DeploymentList
		if err := c.List(ctx, &list, client.HasLabels{apply.LabelOwnerName}); err != nil {
			if ctx.Err() == nil {
				d.out.say("kube-controller-manager stand-in: list Deployments: %v (retrying)", err)
			}
			continue
		}
		for i := range list.Items {
			dep := &list.Items[i]
			if rolledOut(dep) {
				continue
			}
			key := fmt.Sprintf("%s/%s@%d", dep.Namespace, dep.Name, dep.Generation)
			seen, ok := firstSeen[key]
			if !ok {
				firstSeen[key] = time.Now()
				d.out.say("Deployment %s/%s (generation %d, %d replicas) exists on the management cluster, but no kube-controller-manager runs here to start its pods;",
					dep.Namespace, dep.Name, dep.Generation, replicas(dep))
				d.out.detail(fmt.Sprintf("the demo plays that part and reports it rolled out in %s", deploymentHold))
				continue
			}
			if time.Since(seen) < deploymentHold {
				continue
			}
			markRolledOut(dep)
			if err := c.Status().Update(ctx, dep, client.FieldOwner(fieldOwner)); err != nil {
				if !apierrors.IsConflict(err) && ctx.Err() == nil {
					d.out.say("kube-controller-manager stand-in: update status of Deployment %s/%s: %v (retrying)", dep.Namespace, dep.Name, err)
				}
				continue
			}
			d.out.say("kube-controller-manager (played by the demo): Deployment %s/%s has %d/%d replicas available",
				dep.Namespace, dep.Name, replicas(dep), replicas(dep))
		}
	}
}

func replicas(dep *appsv1.Deployment) int32 { return ptr.Deref(dep.Spec.Replicas, 1) }

func rolledOut(dep *appsv1.Deployment) bool {
	if dep.Status.ObservedGeneration < dep.Generation || dep.Status.AvailableReplicas != replicas(dep) {
		return false
	}
	for _, c := range dep.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// markRolledOut sets the status kube-controller-manager writes once every replica is updated
// and available; kstatus needs all of it (including Progressing=NewReplicaSetAvailable) to call
// a Deployment Current.
func markRolledOut(dep *appsv1.Deployment) {
	n := replicas(dep)
	now := metav1.Now()
	dep.Status = appsv1.DeploymentStatus{
		ObservedGeneration: dep.Generation,
		Replicas:           n,
		UpdatedReplicas:    n,
		ReadyReplicas:      n,
		AvailableReplicas:  n,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable",
				Message: "Deployment has minimum availability.", LastUpdateTime: now, LastTransitionTime: now},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable",
				Message: "ReplicaSet has successfully progressed.", LastUpdateTime: now, LastTransitionTime: now},
		},
	}
}
