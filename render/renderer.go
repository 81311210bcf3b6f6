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
	files bool
	// placed, when set, collects every object placed (mode.placed).
	placed *placedObjects
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
				r.place(obj, dirPhase, &Error{File: source[name], Err: fmt.Errorf("object %s", describeObject(obj))}, nil)
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
			// A plain file's lines are the author's; a template's rendered lines are not the
			// template's, so its problems keep pointing at the document.
			doc := &o.doc
			if source[name] != name {
				doc = nil
			}
			if !r.place(o.obj, "", &Error{File: source[name], Document: o.doc.index, Line: o.doc.startLine}, doc) {
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
// at says where the object came from, for errors; doc is the document of a plain file it was
// decoded from, nil for a template's or a kustomization's object. It reports whether the object
// was added: not when a condition leaves it out, or when it is refused.
func (r *renderer) place(obj *unstructured.Unstructured, defaultPhase string, at *Error, doc *document) bool {
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
		// Refused, but checked all the same, so that its other problems are reported at once
		// (its labels are, here).
		if r.placed != nil {
			r.placed.addRefused(obj, at, r.prefix, doc)
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
	if r.placed != nil {
		r.placed.add(obj, at, r.prefix, doc)
	}
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
