package render

import (
	"errors"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"pkgsync.dev/pkgsync/render/schema"
)

// placedObject is an object a render placed in a phase and where it came from, for errors:
// at, and doc, the document of a plain file it was decoded from (nil for a template's or a
// kustomization's), where a problem's field has a line of its own.
type placedObject struct {
	obj *unstructured.Unstructured
	at  Error
	doc *document
	// labelsRefused marks an object refused for its labels, and so not placed in a phase: it is
	// checked for its other problems only, its labels' being reported already.
	labelsRefused bool
}

// placedObjects collects what a render placed, in every component it renders, so that the
// objects can be checked against the schemas of every CustomResourceDefinition of the package
// once the render is done.
type placedObjects struct {
	list []placedObject
}

// add records obj, placed from at (decoded from doc, when not nil) in the component whose
// directory is prefix.
func (p *placedObjects) add(obj *unstructured.Unstructured, at *Error, prefix string, doc *document) {
	e := *at
	e.File = prefix + e.File
	p.list = append(p.list, placedObject{obj: obj, at: e, doc: doc})
}

// addRefused records obj, refused for its labels, to be checked for its other problems.
func (p *placedObjects) addRefused(obj *unstructured.Unstructured, at *Error, prefix string, doc *document) {
	p.add(obj, at, prefix, doc)
	p.list[len(p.list)-1].labelsRefused = true
}

// objectChecks is what checking a render's objects found.
type objectChecks struct {
	problems Errors
	// notChecked names the kinds of the objects there was no schema for.
	notChecked []string
}

// check checks every object placed as the API server of release target would (schema.Checker;
// the zero Release for the schemas' own), with the CustomResourceDefinitions among them and crds.
func (p *placedObjects) check(crds []*unstructured.Unstructured, target schema.Release) objectChecks {
	all := slices.Clone(crds)
	for _, po := range p.list {
		if gvk := po.obj.GroupVersionKind(); gvk.Group == "apiextensions.k8s.io" && gvk.Kind == "CustomResourceDefinition" {
			all = append(all, po.obj)
		}
	}
	checker := schema.New(all...).For(target)
	var out objectChecks
	for _, po := range p.list {
		problems, known := checker.Check(po.obj)
		if kind := po.obj.GetAPIVersion() + " " + po.obj.GetKind(); !known && !slices.Contains(out.notChecked, kind) {
			out.notChecked = append(out.notChecked, kind)
		}
		for _, sp := range problems {
			if po.labelsRefused && strings.HasPrefix(sp.Field, "metadata.labels") {
				continue
			}
			out.problems = append(out.problems, objectProblem(po, sp))
		}
	}
	slices.Sort(out.notChecked)
	return out
}

// objectProblem is a schema problem of a placed object, where the object came from: at the
// field's own line when the object's document has it.
func objectProblem(po placedObject, sp schema.Problem) *Error {
	e := po.at
	e.Field = sp.Field
	if po.doc != nil {
		if line := po.doc.fieldLine(sp.Field); line > 0 {
			e.Line = line
		}
	}
	what := describeObject(po.obj)
	if po.at.Err != nil {
		// A kustomization's object: at.Err names it.
		what = po.at.Err.Error()
	}
	e.Err = errors.New(what + ": " + sp.Detail)
	return &e
}
