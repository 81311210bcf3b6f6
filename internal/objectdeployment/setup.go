package objectdeployment

import (
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/reconciler"
	"pkgsync.dev/pkgsync/internal/setup"
)

// Setup registers the ObjectDeployment and ClusterObjectDeployment
// reconcilers. Both are woken by their own spec; ObjectDeployments also by the hosted inputs of
// their namespace (having no templates, not by a change of what templates read of a HostedCluster).
func Setup(s *setup.Services) error {
	namespaced := &objectDeploymentSteps[*v1alpha1.ObjectDeployment]{apiReader: s.Manager.GetAPIReader(), options: s.Options, applier: s.Applier, kind: v1alpha1.ObjectDeploymentKind}
	b := s.ControllerFor("objectdeployment", &v1alpha1.ObjectDeployment{})
	b = s.WatchHostedInputs(b, func() client.ObjectList { return &v1alpha1.ObjectDeploymentList{} }, nil)
	if err := b.Complete(reconciler.New(s.LifecycleBase(), v1alpha1.ObjectDeploymentKind,
		func() *v1alpha1.ObjectDeployment { return &v1alpha1.ObjectDeployment{} }, namespaced.steps())); err != nil {
		return fmt.Errorf("set up objectdeployment controller: %w", err)
	}

	cluster := &objectDeploymentSteps[*v1alpha1.ClusterObjectDeployment]{apiReader: s.Manager.GetAPIReader(), options: s.Options, applier: s.Applier, kind: v1alpha1.ClusterObjectDeploymentKind}
	if err := s.ControllerFor("clusterobjectdeployment", &v1alpha1.ClusterObjectDeployment{}).Complete(reconciler.New(s.LifecycleBase(),
		v1alpha1.ClusterObjectDeploymentKind, func() *v1alpha1.ClusterObjectDeployment { return &v1alpha1.ClusterObjectDeployment{} }, cluster.steps())); err != nil {
		return fmt.Errorf("set up clusterobjectdeployment controller: %w", err)
	}
	return nil
}
