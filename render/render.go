package render

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/desired"
	"pkgsync.dev/pkgsync/render/schema"
)

// pkoPackageDir is where Package Operator images keep the package; a tree whose root has no
// manifest but this directory has one is rendered from there.
const pkoPackageDir = v1alpha1.PackageOperatorImageDir

// Render turns the package tree fsys and opts into phases. When anything is wrong it returns
// Errors holding every problem found: *Error for a broken package, *ConfigError for a
// configuration that does not satisfy the package's schema.
func Render(ctx context.Context, fsys fs.FS, opts Options) (*Result, error) {
	return renderWarning(ctx, fsys, opts, mode{})
}

// renderWarning is renderWith, its warnings in the result.
func renderWarning(ctx context.Context, fsys fs.FS, opts Options, m mode) (*Result, error) {
	m.warnings = new([]Warning)
	res, err := renderWith(ctx, fsys, opts, m)
	if res != nil {
		res.Warnings = *m.warnings
	}
	return res, err
}

// mode says how a render differs from a plain Render.
type mode struct {
	// allowMissing lets configuration values the schema requires be absent (a build).
	allowMissing bool
	// noCluster skips the constraints: a build has no cluster to check them against.
	noCluster bool
	// testCase renders as Package Operator's template tests do (see RenderTestCase).
	testCase bool
	// warnings collects the render's warnings, whether or not it fails; nil drops them.
	warnings *[]Warning
	// placed, when set, collects every object placed, to be checked against schemas.
	placed *placedObjects
	// located, when set, records the manifest read first (RenderLocated); placed where the
	// objects came from.
	located *Located
}

// warn records warnings of the render.
func (m mode) warn(w ...Warning) {
	if m.warnings != nil {
		*m.warnings = append(*m.warnings, w...)
	}
}

// Validate renders the package and returns every problem at once, or nil.
func Validate(ctx context.Context, fsys fs.FS, opts Options) error {
	_, err := Render(ctx, fsys, opts)
	return err
}

// ValidateStructure checks the package itself, as a build does before packing it: the manifest,
// the configuration schema and its defaults, the object files, their phases, the kustomizations
// and the templates. Unlike Validate it accepts a configuration (opts.Config, often none) that
// lacks values the schema requires. Templates are then parsed but not executed, since an
// incomplete configuration proves nothing about their output, and kustomizations built from
// templates are skipped. Every other problem is reported as Render reports it, and every object
// rendered is checked as ValidatePackage checks it (against the package's own
// CustomResourceDefinitions only).
func ValidateStructure(ctx context.Context, fsys fs.FS, opts Options) error {
	m := mode{allowMissing: true, noCluster: true, placed: &placedObjects{}}
	_, err := renderWith(ctx, fsys, opts, m)
	var errs Errors
	if err != nil && !errors.As(err, &errs) {
		return err
	}
	errs = append(errs, m.placed.check(nil, schema.Release{}).problems...)
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// renderWith is Render in a mode.
func renderWith(ctx context.Context, fsys fs.FS, opts Options, m mode) (*Result, error) {
	allowMissing := m.allowMissing
	fsys, _, err := packageRoot(fsys)
	if err != nil {
		return nil, err
	}
	c, errs := selectComponent(fsys, opts.Component)
	if len(errs) > 0 {
		return nil, errs
	}
	res, err := renderComponent(ctx, c, opts, m)
	if !c.skipComponents {
		return res, err
	}
	// The root of a multi-component package: components/ must be laid out right, and a build
	// checks every component as it checks the root.
	names, layoutErrs := componentNames(fsys)
	if err != nil {
		var rootErrs Errors
		if !errors.As(err, &rootErrs) {
			return nil, err
		}
		errs = append(errs, rootErrs...)
	}
	errs = append(errs, layoutErrs...)
	if allowMissing {
		for _, name := range names {
			opts.Component = name
			c, cErrs := selectComponent(fsys, name)
			if len(cErrs) == 0 {
				_, err := renderComponent(ctx, c, opts, m)
				var compErrs Errors
				if err != nil && !errors.As(err, &compErrs) {
					return nil, err
				}
				cErrs = compErrs
			}
			errs = append(errs, cErrs...)
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return res, nil
}

// renderComponent renders one component: the root package or one of components/.
func renderComponent(ctx context.Context, c component, opts Options, m mode) (*Result, error) {
	res, err := renderTree(ctx, c, opts, m)
	var errs Errors
	if errors.As(err, &errs) {
		return nil, c.rebase(errs)
	}
	return res, err
}

// renderTree renders the package tree of one component.
func renderTree(ctx context.Context, c component, opts Options, m mode) (*Result, error) {
	fsys := c.fsys
	manifest, manifestFile, pko, errs := readManifestFormat(fsys)
	if manifest == nil {
		return nil, errs
	}
	m.located.manifest(manifest, c.prefix+manifestFile)
	if cErrs := checkConstraintSpecs(manifestFile, manifest); len(cErrs) > 0 {
		return nil, append(errs, cErrs...)
	}
	// Constraints come first: a package the cluster cannot run renders nothing. A build has no
	// cluster to check them against.
	if !m.noCluster && len(errs) == 0 {
		if err := CheckConstraints(manifest, opts.Environment); err != nil {
			return nil, err
		}
	}
	images, imageErrs := lockedImages(fsys, manifestFile, manifest, pko)
	errs = append(errs, imageErrs...)
	if opts.RelocateImage != nil {
		for name, img := range images {
			if s, ok := img.(string); ok {
				images[name] = opts.RelocateImage(s)
			}
		}
	}
	if m.testCase && len(imageErrs) == 0 {
		// The lock is checked all the same, as Package Operator's tests check it.
		for name := range images {
			images[name] = TestImage
		}
	}

	if opts.Name == "" && !m.testCase {
		// A test case's context is what it says, as in Package Operator: an empty name too.
		opts.Name = manifest.Name
	}
	cfg, configOK, cfgErrs := configure(manifestFile, manifest, opts.Config, pko, m)
	errs = append(errs, cfgErrs...)

	// Templates and filters would only add confusing errors without the images they read.
	configOK = configOK && len(imageErrs) == 0

	tree, err := readTree(ctx, fsys, c.skipComponents)
	if err != nil {
		return nil, err
	}
	data := templateData(opts, images, cfg)
	celData := data
	if pko {
		// Package Operator's context, with its types, for Package Operator's format.
		if data, celData, err = pkoTemplateData(opts, images, cfg, m.testCase); err != nil {
			return nil, err
		}
	}
	// Filters are evaluated only against a complete, valid configuration, like templates.
	flt, filterErrs := newFilters(ctx, manifestFile, manifest, celData, configOK)
	errs = append(errs, filterErrs...)
	if flt == nil {
		return nil, errs
	}
	r := &renderer{
		manifest: manifest,
		tp:       newTemplaterFor(ctx, tree, data, renderFuncs(flt.cel, tree)),
		filters:  flt,
		phases:   map[string]int{},
		seen:     map[objectKey]string{},
		prefix:   c.prefix,
		files:    m.testCase,
		placed:   m.placed,
	}
	r.phaseAnnotation = v1alpha1.PhaseAnnotation
	if pko {
		r.keys, r.phaseAnnotation = repeatedKeyReplaces, pkoPhaseAnnotation
	}
	// Templates and CEL expressions record what they read in one place.
	r.tp.reads = flt.cel.reads
	for i, p := range manifest.Spec.Phases {
		r.phases[p.Name] = i
		r.result.Phases = append(r.result.Phases, desired.Phase{Name: p.Name, Class: p.Class})
	}
	r.errs = errs
	// Templates see a configuration only once it is valid; rendering them with a broken one
	// would only add confusing errors.
	r.load(ctx, tree, configOK)
	if err := ctx.Err(); err != nil {
		// The problems found so far are real, and say more than the context's error: a
		// template stopped by the deadline names its file and line, and wraps that error.
		if len(r.errs) > 0 {
			return nil, r.errs
		}
		return nil, err
	}
	if len(r.errs) > 0 {
		return nil, r.errs
	}
	// A copy, not &r.result: the render cache keeps results for as long as their Packages live,
	// and a pointer into the renderer would keep it all (templates, their function maps, the CEL
	// environment, the file tree) reachable with it, ~45 KB per cached render.
	res := r.result
	res.Manifest, res.Config = manifest, cfg
	res.Inputs = flt.cel.reads.inputs()
	return &res, nil
}

// configure checks the manifest's configuration schema and applies it to the configuration
// raw: the configuration templates see, whether it is complete and valid, and the problems of
// both. Its warnings go to m.
func configure(manifestFile string, manifest *v1alpha1.PackageManifest, raw []byte, pko bool, m mode) (map[string]any, bool, Errors) {
	schema, errs := newConfigSchema(manifestFile, manifest.Spec.Config.OpenAPIV3Schema)
	if len(errs) > 0 {
		return nil, false, errs
	}
	cfg, warnings, errs := schema.apply(raw, pko)
	m.warn(warnings...)
	missing := false
	if m.allowMissing {
		errs, missing = withoutMissing(errs)
	}
	return cfg, len(errs) == 0 && !missing, errs
}

// withoutMissing drops the errors of required configuration values that are absent and reports
// whether there were any.
func withoutMissing(errs Errors) (Errors, bool) {
	var kept Errors
	missing := false
	for _, err := range errs {
		var ce *ConfigError
		if errors.As(err, &ce) && ce.missing {
			missing = true
			continue
		}
		kept = append(kept, err)
	}
	return kept, missing
}

// packageRoot returns the package root within fsys and its directory: "." or package/
// (Package Operator's image layout).
func packageRoot(fsys fs.FS) (fs.FS, string, error) {
	for _, n := range manifestFiles {
		if _, err := fs.Stat(fsys, n); err == nil {
			return fsys, ".", nil
		}
	}
	for _, n := range manifestFiles {
		if _, err := fs.Stat(fsys, path.Join(pkoPackageDir, n)); err == nil {
			sub, err := fs.Sub(fsys, pkoPackageDir)
			if err != nil {
				return nil, "", fmt.Errorf("open %s/: %w", pkoPackageDir, err)
			}
			return sub, pkoPackageDir, nil
		}
	}
	return fsys, ".", nil
}
