package render

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/desired"
)

// pkoPackageDir is where Package Operator images keep the package; a tree whose root has no
// manifest but this directory has one is rendered from there.
const pkoPackageDir = v1alpha1.PackageOperatorImageDir

// Render turns the package tree fsys and opts into phases. When anything is wrong it returns
// Errors holding every problem found: *Error for a broken package, *ConfigError for a
// configuration that does not satisfy the package's schema.
func Render(ctx context.Context, fsys fs.FS, opts Options) (*Result, error) {
	return renderWith(ctx, fsys, opts, mode{})
}

// mode says how a render differs from a plain Render.
type mode struct {
	// allowMissing lets configuration values the schema requires be absent (a build).
	allowMissing bool
	// noCluster skips the constraints: a build has no cluster to check them against.
	noCluster bool
	// testCase renders as Package Operator's template tests do (see RenderTestCase).
	testCase bool
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
// templates are skipped. Every other problem is reported as Render reports it.
func ValidateStructure(ctx context.Context, fsys fs.FS, opts Options) error {
	_, err := renderWith(ctx, fsys, opts, mode{allowMissing: true, noCluster: true})
	return err
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
	allowMissing := m.allowMissing
	fsys := c.fsys
	manifest, manifestFile, pko, errs := readManifestFormat(fsys)
	if manifest == nil {
		return nil, errs
	}
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
	schema, schemaErrs := newConfigSchema(manifestFile, manifest.Spec.Config.OpenAPIV3Schema)
	errs = append(errs, schemaErrs...)
	var cfg map[string]any
	configOK := false
	if len(schemaErrs) == 0 {
		var cfgErrs Errors
		cfg, cfgErrs = schema.apply(opts.Config, pko)
		missing := false
		if allowMissing {
			cfgErrs, missing = withoutMissing(cfgErrs)
		}
		errs = append(errs, cfgErrs...)
		configOK = len(cfgErrs) == 0 && !missing
	}

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
		tp:       newTemplater(ctx, tree.helpers, tree.helperOrder, data, renderFuncs(flt.cel, tree)),
		filters:  flt,
		phases:   map[string]int{},
		seen:     map[objectKey]string{},
		prefix:   c.prefix,
		files:    m.testCase,
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

// tree is a package's files, read once.
type tree struct {
	helpers     map[string]string
	helperOrder []string
	files       map[string]string // every other file, by path
	order       []string          // files in walk (lexical) order
}

// readTree reads every file of the package except dot-files, dot-directories, the manifest
// itself and, with skipComponents, components/. Files whose name starts with "_" are template
// helpers.
func readTree(ctx context.Context, fsys fs.FS, skipComponents bool) (*tree, error) {
	t := &tree{helpers: map[string]string{}, files: map[string]string{}}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if p != "." && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if skipComponents && d.IsDir() && p == componentsDir {
			return fs.SkipDir
		}
		if d.IsDir() {
			return nil
		}
		// A link is never followed: it could name a file outside the package, and a template's
		// getFile or a kustomize generator would then copy it into an object. Trees read from
		// disk come through source.LoadDir, which refuses links with build's message before
		// this; this refusal is for a caller that passes os.DirFS itself.
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file (%s): packages hold regular files only", p, d.Type())
		}
		if ignoredRootFiles.Has(p) {
			return nil
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), "_") {
			t.helpers[p] = string(data)
			t.helperOrder = append(t.helperOrder, p)
			return nil
		}
		t.files[p] = string(data)
		t.order = append(t.order, p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read package: %w", err)
	}
	return t, nil
}

// objectKey identifies an object in the cluster its phase goes to.
type objectKey struct {
	class, group, kind, namespace, name string
}

type renderer struct {
	manifest *v1alpha1.PackageManifest
	tp       *templater
	filters  *filters
	phases   map[string]int
	seen     map[objectKey]string
	// prefix is the component's directory (see component.prefix), for the file names that
	// errors give in their text.
	prefix string
	// keys is what a key repeated in an object file's mapping does: Package Operator's rule
	// for its format, refused in pkgsync's own.
	keys keyRule
	// phaseAnnotation is the phase annotation of the package's format, which errors name.
	phaseAnnotation string
	// files asks for result.Files (RenderTestCase).
	files  bool
	result Result
	errs   Errors
}

func (r *renderer) fail(err error) { r.errs = append(r.errs, err) }

// load renders the templates, then loads plain object files and kustomizations in path order.
func (r *renderer) load(ctx context.Context, t *tree, renderTemplates bool) {
	helpersOK := true
	for _, h := range t.helperOrder {
		if err := r.tp.checkHelper(h, t.helpers[h]); err != nil {
			r.fail(err)
			helpersOK = false
		}
	}

	// rendered holds every file under its final name; source maps that name to the file the
	// author wrote, for error messages.
	rendered := map[string]string{}
	source := map[string]string{}
	incomplete := map[string]bool{} // final names of templates that could not be rendered
	for _, p := range t.order {
		if ctx.Err() != nil {
			return
		}
		name, isTemplate := strings.CutSuffix(p, ".gotmpl")
		if r.filters.excluded(p, name) {
			continue
		}
		if isTemplate {
			if _, clash := t.files[name]; clash {
				r.fail(&Error{File: p, Err: fmt.Errorf("both %s and %s exist: a template renders to the name without .gotmpl", p, name)})
				continue
			}
		}
		source[name] = p
		if !isTemplate {
			rendered[name] = t.files[p]
			continue
		}
		if !renderTemplates || !helpersOK {
			incomplete[name] = true
			// Syntax errors do not depend on the configuration: report them anyway.
			if helpersOK {
				if _, err := r.tp.newTemplate(p, t.files[p]); err != nil {
					r.fail(err)
				}
			}
			continue
		}
		out, err := r.tp.execute(p, t.files[p])
		if err != nil {
			r.fail(err)
			incomplete[name] = true
			continue
		}
		rendered[name] = out
	}

	names := make([]string, 0, len(source))
	for n := range source {
		names = append(names, n)
	}
	slices.Sort(names)

	roots, refsOK := r.kustomizationRoots(names, rendered, source)
	var kust *kustomizer
	for _, name := range names {
		if ctx.Err() != nil {
			return
		}
		if underUnderscoreDir(name) {
			continue
		}
		if root, ok := rootOf(name, roots); ok {
			if !isKustomizationFile(name) || path.Dir(name) != root {
				continue
			}
			if !refsOK || anyIncomplete(root, incomplete) {
				continue
			}
			if kust == nil {
				var err error
				if kust, err = newKustomizer(rendered); err != nil {
					r.fail(err)
					return
				}
			}
			objs, err := kust.build(root)
			if err != nil {
				r.fail(&Error{File: source[name], Err: err})
				continue
			}
			dirPhase := ""
			if _, ok := r.phases[path.Base(root)]; ok && root != "." {
				dirPhase = path.Base(root)
			}
			for _, obj := range objs {
				r.place(obj, dirPhase, &Error{File: source[name], Err: fmt.Errorf("object %s", describeObject(obj))})
			}
			continue
		}
		if ext := path.Ext(name); ext != ".yaml" && ext != ".yml" {
			continue
		}
		if incomplete[name] {
			continue
		}
		objs, errs := parseObjects(source[name], rendered[name], r.keys)
		for _, err := range errs {
			r.fail(err)
		}
		var left []int // the file's objects left out, by their index among its objects
		for i, o := range objs {
			if !r.place(o.obj, "", &Error{File: source[name], Document: o.document, Line: o.line}) {
				left = append(left, i)
			}
		}
		if r.files && len(objs) > 0 {
			r.addFile(name, rendered[name], left)
		}
	}
}

// addFile records a rendered YAML file for result.Files as Package Operator's template test
// writes it to a fixture: as rendered when no object is left out; otherwise split on lines that
// are exactly "---" (after "-" and newlines are trimmed off both ends of the file), each document
// trimmed of surrounding space, joined with "\n---\n" and ended with a newline, without the
// documents left out, and not at all when nothing but space is left. Like Package Operator it
// drops the documents at the indexes of the objects left out among the file's objects, which
// are other documents when a document without an object (a comment, null) comes before them:
// its fixtures show that, and pkgsync test compares with them.
func (r *renderer) addFile(name, content string, left []int) {
	if len(left) > 0 {
		docs := pkoDocumentSeparator.Split(strings.Trim(content, "-\n"), -1)
		var kept []string
		for i, doc := range docs {
			if !slices.Contains(left, i) {
				kept = append(kept, strings.TrimSpace(doc))
			}
		}
		content = strings.Join(kept, "\n---\n") + "\n"
	}
	if strings.TrimSpace(content) == "" {
		return
	}
	r.result.Files = append(r.result.Files, File{Path: name, Content: content})
}

// pkoDocumentSeparator is how Package Operator splits a file into YAML documents.
var pkoDocumentSeparator = regexp.MustCompile(`(?m)^---$`)

// kustomizationRoots finds the outermost directories holding a kustomization, outside
// "_" directories, and checks every kustomization of the package for references outside it.
// It reports whether all of them refer only to the package: if not, nothing is built.
func (r *renderer) kustomizationRoots(names []string, rendered, source map[string]string) ([]string, bool) {
	var roots []string
	refsOK := true
	pkg := newPackageFiles(names, rendered)
	for _, name := range names {
		if !isKustomizationFile(name) {
			continue
		}
		if data, ok := rendered[name]; ok {
			for _, e := range checkKustomization(name, data, pkg) {
				if src, ok := source[e.File]; ok {
					e.File = src // the file the author wrote
				}
				r.fail(e)
				refsOK = false
			}
		}
		if underUnderscoreDir(name) {
			continue
		}
		dir := path.Dir(name)
		if _, nested := rootOf(name, roots); !nested {
			roots = append(roots, dir)
		}
	}
	return roots, refsOK
}

// place checks an object's phase annotations, strips them and adds the object to its phase.
// at says where the object came from, for errors. It reports whether the object was added:
// not when a condition leaves it out, or when it is refused.
func (r *renderer) place(obj *unstructured.Unstructured, defaultPhase string, at *Error) bool {
	fail := func(field string, err error) {
		e := *at
		e.Field = field
		if at.Err != nil {
			err = fmt.Errorf("%w: %w", at.Err, err)
		} else {
			err = fmt.Errorf("%s: %w", describeObject(obj), err)
		}
		e.Err = err
		r.fail(&e)
	}
	// Labels are checked before the filters, as Package Operator checks them: an object with
	// an invalid label is refused even where a condition leaves it out.
	if errs := metav1validation.ValidateLabels(obj.GetLabels(), field.NewPath("metadata", "labels")); len(errs) > 0 {
		for _, fe := range errs {
			fail(fe.Field, errors.New(fe.ErrorBody()))
		}
		return false
	}
	keep, err := r.filters.keep(obj)
	if err != nil {
		fail("metadata.annotations."+conditionAnnotation, err)
		return false
	}
	if !keep {
		return false
	}
	ann := obj.GetAnnotations()
	if _, ok := ann[pkoExternalAnnotation]; ok {
		fail("metadata.annotations."+pkoExternalAnnotation, errors.New("not supported: pkgsync applies every object of a package, it cannot only observe one; remove the object or the annotation"))
		return false
	}
	var mappings []desired.ConditionMapping
	if value, ok := ann[conditionMapAnnotation]; ok {
		if mappings, err = parseConditionMap(value); err != nil {
			fail("metadata.annotations."+conditionMapAnnotation, err)
			return false
		}
	}
	own, pko := ann[v1alpha1.PhaseAnnotation], ann[pkoPhaseAnnotation]
	if own != "" && pko != "" && own != pko {
		fail("metadata.annotations", fmt.Errorf("%s %q and %s %q disagree; keep one", v1alpha1.PhaseAnnotation, own, pkoPhaseAnnotation, pko))
		return false
	}
	phase := own
	if phase == "" {
		phase = pko
	}
	if phase == "" {
		phase = defaultPhase
	}
	if phase == "" {
		fail("metadata.annotations", fmt.Errorf("missing phase: add the annotation %s with one of the manifest's phases (%s)", r.phaseAnnotation, r.phaseList()))
		return false
	}
	idx, ok := r.phases[phase]
	if !ok {
		fail("metadata.annotations", fmt.Errorf("unknown phase %q: the manifest declares %s", phase, r.phaseList()))
		return false
	}
	delete(ann, v1alpha1.PhaseAnnotation)
	delete(ann, pkoPhaseAnnotation)
	delete(ann, conditionAnnotation)
	delete(ann, conditionMapAnnotation)
	if len(ann) == 0 {
		unstructured.RemoveNestedField(obj.Object, "metadata", "annotations")
	} else {
		obj.SetAnnotations(ann)
	}

	p := &r.result.Phases[idx]
	gvk := obj.GroupVersionKind()
	key := objectKey{class: p.Class, group: gvk.Group, kind: gvk.Kind, namespace: obj.GetNamespace(), name: obj.GetName()}
	where := r.prefix + at.File
	if at.Document > 0 {
		where = fmt.Sprintf("%s (document %d)", where, at.Document)
	}
	if prev, dup := r.seen[key]; dup {
		fail("metadata.name", fmt.Errorf("duplicate object, already defined in %s", prev))
		return false
	}
	r.seen[key] = where
	for _, m := range mappings {
		m.Object = len(p.Objects)
		p.ConditionMappings = append(p.ConditionMappings, m)
	}
	p.Objects = append(p.Objects, obj)
	return true
}

func (r *renderer) phaseList() string {
	names := make([]string, 0, len(r.manifest.Spec.Phases))
	for _, p := range r.manifest.Spec.Phases {
		names = append(names, p.Name)
	}
	return strings.Join(names, ", ")
}

func describeObject(obj *unstructured.Unstructured) string {
	s := obj.GetKind() + " " + obj.GetName()
	if ns := obj.GetNamespace(); ns != "" {
		s = obj.GetKind() + " " + ns + "/" + obj.GetName()
	}
	return s
}

func isKustomizationFile(name string) bool {
	return slices.Contains(kustomizationFiles, path.Base(name))
}

// underUnderscoreDir reports whether a file sits below a directory whose name starts with "_":
// such directories hold kustomize bases and shared files, never loaded on their own.
func underUnderscoreDir(name string) bool {
	dirs := strings.Split(path.Dir(name), "/")
	for _, d := range dirs {
		if strings.HasPrefix(d, "_") {
			return true
		}
	}
	return false
}

// rootOf finds the kustomization root that contains name.
func rootOf(name string, roots []string) (string, bool) {
	for _, root := range roots {
		if root == "." || strings.HasPrefix(name, root+"/") {
			return root, true
		}
	}
	return "", false
}

func anyIncomplete(root string, incomplete map[string]bool) bool {
	for name := range incomplete {
		if root == "." || strings.HasPrefix(name, root+"/") {
			return true
		}
	}
	return false
}
