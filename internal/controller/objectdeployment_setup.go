package controller

import (
	"fmt"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/reconciler"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// setupObjectDeployments registers the ObjectDeployment and ClusterObjectDeployment
// reconcilers. Both are woken by their own spec; ObjectDeployments also by the hosted inputs of
// their namespace (having no templates, not by a change of what templates read of a HostedCluster).
func setupObjectDeployments(s *services) error {
	namespaced := &objectDeploymentSteps[*v1alpha1.ObjectDeployment]{apiReader: s.mgr.GetAPIReader(), options: s.opts, applier: s.applier, kind: v1alpha1.ObjectDeploymentKind}
	b := s.controllerFor("objectdeployment", &v1alpha1.ObjectDeployment{})
	b = s.watchHostedInputs(b, func() client.ObjectList { return &v1alpha1.ObjectDeploymentList{} }, nil)
	if err := b.Complete(reconciler.New(s.lifecycleBase(), v1alpha1.ObjectDeploymentKind,
		func() *v1alpha1.ObjectDeployment { return &v1alpha1.ObjectDeployment{} }, namespaced.steps())); err != nil {
		return fmt.Errorf("set up objectdeployment controller: %w", err)
	}

	cluster := &objectDeploymentSteps[*v1alpha1.ClusterObjectDeployment]{apiReader: s.mgr.GetAPIReader(), options: s.opts, applier: s.applier, kind: v1alpha1.ClusterObjectDeploymentKind}
	if err := s.controllerFor("clusterobjectdeployment", &v1alpha1.ClusterObjectDeployment{}).Complete(reconciler.New(s.lifecycleBase(),
		v1alpha1.ClusterObjectDeploymentKind, func() *v1alpha1.ClusterObjectDeployment { return &v1alpha1.ClusterObjectDeployment{} }, cluster.steps())); err != nil {
		return fmt.Errorf("set up clusterobjectdeployment controller: %w", err)
	}
	return nil
}
