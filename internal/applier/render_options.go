package applier

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/fluxcd/pkg/apis/meta"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/internal/reconciler"
	"pkgsync.dev/pkgsync/render"
)

// +kubebuilder:rbac:groups=config.openshift.io,resources=clusterversions;proxies,verbs=get

// MaxRenderTime bounds one render, within the reconcile's own deadline (spec.timeout).
const MaxRenderTime = 30 * time.Second

// RenderOptions are the options a Package (or ClusterPackage) is rendered with: its name,
// namespace, labels and annotations (the reconcile request annotation dropped), the image pinned
// to a digest, its component, its configuration, and the environment of its namespace. The
// Package reconciler renders with them, and so does a fleet's preflight for the member it
// would write, so that a preflight renders exactly what the member will.
//
// config is the configuration as ReadConfig makes it, spec.config merged over what
// spec.configFrom read: spec.config alone is not what a Package renders with, so it is not
// read here.
func RenderOptions(opts reconciler.Options, name, namespace string, lbls, annotations map[string]string, spec *v1alpha1.PackageSpec, image string, config []byte, hc *hosted.HostedCluster) render.Options {
	return render.Options{
		Name:        name,
		Namespace:   namespace,
		Labels:      lbls,
		Annotations: userAnnotations(annotations),
		Image:       image,
		Component:   spec.Component,
		Config:      config,
		Environment: templateEnvironment(opts, hc),
		// The same for every resource: the render cache need not key on it.
		RelocateImage: opts.RelocateImage(),
	}
}

// templateEnvironment is what a package's templates see under .environment: the management
// cluster's versions and proxy, and the HostedCluster behind a hosted-control-plane namespace
// with its labels, annotations and node selector (as findHostedCluster read them).
func templateEnvironment(opts reconciler.Options, hc *hosted.HostedCluster) render.Environment {
	return render.Environment{KubernetesVersion: opts.KubernetesVersion, OpenShiftVersion: opts.OpenShiftVersion, Proxy: opts.Proxy,
		HyperShift: opts.HyperShift, HostedCluster: templateHostedCluster(hc)}
}

// templateHostedCluster is what templates see of a HostedCluster as .environment.hyperShift.
func templateHostedCluster(hc *hosted.HostedCluster) *render.HostedCluster {
	if hc == nil {
		return nil
	}
	return &render.HostedCluster{Name: hc.Name, Namespace: hc.Namespace, HostedClusterNamespace: hc.ControlPlaneNamespace,
		Labels: hc.Labels, Annotations: hc.Annotations, NodeSelector: hc.NodeSelector, PlatformType: hc.PlatformType}
}

// userAnnotations drops the controller's own request annotation from the template context, so
// that `reconcile now` does not change what renders.
func userAnnotations(in map[string]string) map[string]string {
	if _, ok := in[meta.ReconcileRequestAnnotation]; !ok {
		return in
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		if k != meta.ReconcileRequestAnnotation {
			out[k] = v
		}
	}
	return out
}

// CheckScopes enforces the manifest's scopes: a package that lists scopes may only be installed
// by the resources they name.
func CheckScopes(m *v1alpha1.PackageManifest, namespaced bool) error {
	if m == nil || len(m.Spec.Scopes) == 0 {
		return nil
	}
	want := v1alpha1.ScopeCluster
	if namespaced {
		want = v1alpha1.ScopeNamespaced
	}
	for _, s := range m.Spec.Scopes {
		if s == want {
			return nil
		}
	}
	return &reconciler.StageError{Reason: v1alpha1.RenderFailedReason, Err: fmt.Errorf("package %s does not support the %s scope (manifest spec.scopes: %v)", m.Name, want, m.Spec.Scopes)}
}

// PreflightRender renders and validates one member's package. A render that ran out of time,
// or whose reconcile was cancelled, is not a verdict on the revision: ErrTransient says so.
func PreflightRender(ctx context.Context, fsys fs.FS, ro render.Options) (*render.Result, error) {
	renderCtx, cancel := context.WithTimeout(ctx, MaxRenderTime)
	defer cancel()
	res, err := render.Render(renderCtx, fsys, ro)
	switch {
	case err != nil && (ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded)):
		return nil, fmt.Errorf("%w: render for %s: %w", ErrTransient, ro.Namespace, err)
	case err != nil:
		return nil, err
	}
	if err := CheckScopes(res.Manifest, ro.Namespace != ""); err != nil {
		return nil, err
	}
	return res, nil
}

var ErrTransient = errors.New("preflight interrupted")
