package render

import (
	"context"
	"errors"
	"io/fs"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// Located is a render for checks made on its result by a caller that reports in the package's
// terms (pkgsync validate -n): where each object and the manifest came from. Only
// RenderLocated records it; Render does not, so that cached renders stay small.
type Located struct {
	// Result is the render, nil when it failed.
	Result *Result
	// Manifest is the manifest of the root (or of Options.Component), read even when the
	// render failed; nil when it could not be read.
	Manifest *v1alpha1.PackageManifest
	// ManifestFile is its path in the package, for example manifest.yaml.
	ManifestFile string

	origins map[*unstructured.Unstructured]Error
}

// Origin says where obj, an object of Result, was written: its file (as the author wrote it,
// a template's or kustomization's), document and line, Err nil. Nil when not known.
func (l *Located) Origin(obj *unstructured.Unstructured) *Error {
	at, ok := l.origins[obj]
	if !ok {
		return nil
	}
	return &at
}

// RenderLocated renders the package as ValidatePackage checks it (cfg says whether opts.Config
// is the whole configuration) and records where each object came from. The error is the
// render's, as ValidatePackage reports it; the Located is returned beside it.
func RenderLocated(ctx context.Context, fsys fs.FS, opts Options, cfg ValidateConfig) (*Located, error) {
	l := &Located{origins: map[*unstructured.Unstructured]Error{}}
	m := mode{located: l, placed: &placedObjects{}}
	if cfg == WithoutConfig {
		m.allowMissing = true
	}
	res, err := renderWith(ctx, fsys, opts, m)
	var problems Errors
	if err != nil && !errors.As(err, &problems) {
		return nil, err
	}
	l.Result = res
	for _, p := range m.placed.list {
		at := p.at
		at.Err = nil
		l.origins[p.obj] = at
	}
	return l, err
}

// manifest records, for RenderLocated, the manifest a render read first: the root's, or the
// selected component's.
func (l *Located) manifest(m *v1alpha1.PackageManifest, file string) {
	if l != nil && l.Manifest == nil {
		l.Manifest, l.ManifestFile = m, file
	}
}
