package packages

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/applier"
	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/internal/reconciler"
	"pkgsync.dev/pkgsync/render"
	"pkgsync.dev/pkgsync/source"
)

// RenderedPackage is a Package rendered as its reconciler would render it (RenderPackage).
type RenderedPackage struct {
	*render.Result
	config *applier.ConfigInput
}

// Redact removes from an error's message the values of the Secrets spec.configFrom read, as the
// reconciler does before it writes a message to status: an API server's answer about an object
// rendered from them may quote them.
func (p *RenderedPackage) Redact(err error) error { return p.config.Redact(err) }

// RenderPackage renders pkg as the Package reconciler would now, for `pkgsync diff package`:
// with the options the reconciler takes from it (applier.RenderOptions: its name, namespace, labels and
// annotations, image, component, the environment of opts and the HostedCluster behind its
// namespace), and with spec.config merged over what spec.configFrom reads (applier.ReadConfig), then
// checked against the manifest's scopes. image is spec.image pinned to a digest, its package in
// fsys; opts supplies the management cluster's environment (versions, proxy, image overrides)
// as the controller has it.
//
// c reads the HostedClusters and the ConfigMaps and Secrets of spec.configFrom as whoever c
// authenticates as, not as the Package's ServiceAccount. Errors have the Secrets' values
// removed; the rendered objects hold them as the package puts them.
func RenderPackage(ctx context.Context, c client.Reader, opts reconciler.Options, pkg *v1alpha1.Package, image source.Reference, fsys fs.FS) (*RenderedPackage, error) {
	if image.Digest == "" {
		return nil, fmt.Errorf("render %s: the image is not pinned to a digest", image)
	}
	hc, err := hosted.FindHostedCluster(ctx, c, c, pkg.Namespace, false)
	var ambiguous *hosted.AmbiguousError
	switch {
	case errors.As(err, &ambiguous):
		// The reconciler renders nothing then (reconciler.NotHostedError): neither does a preview.
		return nil, fmt.Errorf("the controller does not render Package %s/%s: %w", pkg.Namespace, pkg.Name, ambiguous)
	case err != nil:
		return nil, fmt.Errorf("find the HostedCluster behind namespace %s: %w", pkg.Namespace, err)
	}
	config, err := applier.ReadConfig(ctx, c, pkg.Namespace, &pkg.Spec)
	if err != nil {
		return nil, err
	}
	ro := applier.RenderOptions(opts, pkg.Name, pkg.Namespace, pkg.Labels, pkg.Annotations, &pkg.Spec, image.String(), config.Raw, hc)
	res, err := applier.PreflightRender(ctx, fsys, ro)
	if err != nil {
		return nil, config.Redact(fmt.Errorf("render %s: %w", image, err))
	}
	return &RenderedPackage{Result: res, config: config}, nil
}
