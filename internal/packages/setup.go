package packages

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/reconciler"
	"pkgsync.dev/pkgsync/internal/setup"
)

// Setup registers the Package and ClusterPackage reconcilers, which share one render
// cache. Both are woken by their own spec, by TrustPolicies covering their image, by the
// installations they depend on (spec.dependsOn) and by the ConfigMaps and Secrets they read
// (spec.configFrom); Packages also by the hosted inputs of their namespace (connector Secret,
// HostedCluster, a probe that gets an answer again).
func Setup(ctx context.Context, s *setup.Services) error {
	renders := newRenderCache(s.Options.RenderCacheBytes)
	versions := newImageVersions()
	renders.observe = s.Metrics.ObserveRenderCache
	// readsHostedCluster tells whether a Package's last render read its HostedCluster; one that
	// has not rendered yet may.
	readsHostedCluster := func(namespace, name string) bool {
		in, rendered := renders.reads(renderUser(namespace, name))
		return !rendered || in.HostedCluster
	}

	if err := indexDependencies(ctx, s); err != nil {
		return fmt.Errorf("index spec.dependsOn: %w", err)
	}
	if err := indexConfigSources(ctx, s); err != nil {
		return fmt.Errorf("index spec.configFrom: %w", err)
	}
	sources, err := configSourceCache(s)
	if err != nil {
		return err
	}
	deps := &dependencies{reader: s.Manager.GetClient(), exprs: newReadyExprs()}

	namespaced := &packageSteps[*v1alpha1.Package]{apiReader: s.Manager.GetAPIReader(), source: s.Source, options: s.Options,
		applier: s.Applier, renders: renders, verifier: s.Verifier, versions: versions, kind: v1alpha1.PackageKind, deps: deps}
	b := s.ControllerFor("package", &v1alpha1.Package{})
	b = watchDependencies(b, s.Manager.GetClient(), v1alpha1.PackageKind)
	b = watchConfigSources(b, sources, configSourceUsers(s.Manager.GetClient(), func() client.ObjectList { return &v1alpha1.PackageList{} }))
	b = s.WatchHostedInputs(b, func() client.ObjectList { return &v1alpha1.PackageList{} }, readsHostedCluster)
	b = s.WatchTrustPolicies(b, func() client.ObjectList { return &v1alpha1.PackageList{} }, packageImage)
	if b, err = s.WatchRegistryWakes(ctx, b, &v1alpha1.Package{}, func() client.ObjectList { return &v1alpha1.PackageList{} }, followedImage); err != nil {
		return err
	}
	if err := b.Complete(reconciler.New(s.LifecycleBase(), v1alpha1.PackageKind,
		func() *v1alpha1.Package { return &v1alpha1.Package{} }, namespaced.steps())); err != nil {
		return fmt.Errorf("set up package controller: %w", err)
	}

	cluster := &packageSteps[*v1alpha1.ClusterPackage]{apiReader: s.Manager.GetAPIReader(), source: s.Source, options: s.Options,
		applier: s.Applier, renders: renders, verifier: s.Verifier, versions: versions, kind: v1alpha1.ClusterPackageKind, deps: deps}
	b = s.ControllerFor("clusterpackage", &v1alpha1.ClusterPackage{})
	b = watchDependencies(b, s.Manager.GetClient(), v1alpha1.ClusterPackageKind)
	clusterUsers := configSourceUsers(s.Manager.GetClient(), func() client.ObjectList { return &v1alpha1.ClusterPackageList{} })
	b = watchConfigSources(b, sources, func(ctx context.Context, namespace, id string) []reconcile.Request {
		// A ClusterPackage reads spec.configFrom in the controller's namespace only.
		if namespace != s.Options.Namespace {
			return nil
		}
		return clusterUsers(ctx, "", id)
	})
	b = s.WatchTrustPolicies(b, func() client.ObjectList { return &v1alpha1.ClusterPackageList{} }, packageImage)
	if b, err = s.WatchRegistryWakes(ctx, b, &v1alpha1.ClusterPackage{}, func() client.ObjectList { return &v1alpha1.ClusterPackageList{} }, followedImage); err != nil {
		return err
	}
	if err := b.Complete(reconciler.New(s.LifecycleBase(), v1alpha1.ClusterPackageKind,
		func() *v1alpha1.ClusterPackage { return &v1alpha1.ClusterPackage{} }, cluster.steps())); err != nil {
		return fmt.Errorf("set up clusterpackage controller: %w", err)
	}
	return nil
}

// packageImage is the image of a Package or ClusterPackage, for verify.CoveredResources.
func packageImage(o client.Object) string {
	if p, ok := o.(packageObject); ok {
		return p.GetSpec().Image
	}
	return ""
}

// followedImage is what a Package or ClusterPackage follows, for the index.
func followedImage(o client.Object) (image, semver string) {
	if p, ok := o.(packageObject); ok {
		return p.GetSpec().Image, p.GetSpec().Semver
	}
	return "", ""
}
