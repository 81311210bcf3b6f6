package schema

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/kubernetes/scheme"
)

// Problem is one reason the API server would refuse an object.
type Problem struct {
	// Field is the path of the offending field, for example spec.replicas; empty when the
	// problem is the object as a whole.
	Field string
	// Detail says what is wrong and, where it can, how to fix it.
	Detail string
}

func (p Problem) String() string {
	if p.Field == "" {
		return p.Detail
	}
	return p.Field + ": " + p.Detail
}

// Checker checks objects against what it knows: the kinds built into Kubernetes and the
// custom resources of the CustomResourceDefinitions it was made with. It is safe for
// concurrent use.
//
// Built-in kinds are checked with the API machinery's own schema: the OpenAPI models client-go
// ships (k8s.io/client-go/applyconfigurations) for exactly the Kubernetes version pkgsync is
// built against, read by structured-merge-diff as server-side apply reads them, which reports
// unknown fields, wrong types and duplicate list keys. Neither alternative fits: kubeconform
// downloads JSON schemas from the internet at run time, and the validation the API server runs
// beyond the schema (k8s.io/kubernetes/pkg/apis/*/validation) is not importable as a library
// (k8s.io/kubernetes is not meant to be a dependency: its go.mod replaces every staging
// module). That part is covered by apimachinery's name, label and annotation validation and by
// the short tables of enums.go, names.go, required.go and sizes.go.
//
// The schemas are those of one release. For a cluster of another (For), the checker applies the
// rules of that release it knows (ReleaseRules) and the schemas it has: other releases' schemas
// are not available offline.
type Checker struct {
	typed managedfields.TypeConverter
	crds  map[schema.GroupKind]*customKind
	// target is the release of the cluster the objects are for, the zero Release for the
	// checker's own.
	target Release
}

// New returns a Checker that knows the built-in kinds and the custom resources of crds
// (apiextensions.k8s.io/v1 CustomResourceDefinitions). A definition it cannot use is left out:
// checking that object reports why.
func New(crds ...*unstructured.Unstructured) *Checker {
	c := &Checker{
		typed: applyconfigurations.NewTypeConverter(scheme.Scheme),
		crds:  map[schema.GroupKind]*customKind{},
	}
	for _, obj := range crds {
		if k, err := newCustomKind(obj); err == nil {
			c.crds[k.groupKind] = k
		}
	}
	return c
}

// For returns a checker of the same schemas for objects meant for a cluster of release target.
func (c *Checker) For(target Release) *Checker {
	out := *c
	out.target = target
	return &out
}

// Check returns the problems of obj, none when the API server would accept it as far as the
// checker can tell. known is false when the checker has no schema for obj's kind (neither
// built in nor defined by one of its CustomResourceDefinitions): only what every object shares
// (size, name, namespace, labels, annotations) was checked, the name by the rule of every
// custom resource (a DNS-1123 subdomain). Check does not change obj.
func (c *Checker) Check(obj *unstructured.Unstructured) (problems []Problem, known bool) {
	problems = append(problems, checkObjectSize(obj)...)
	problems = append(problems, checkMetadata(obj)...)
	gvk := obj.GroupVersionKind()
	if gvk.GroupKind() == crdGroupKind {
		// Its own validation checks its name (PLURAL.GROUP).
		return append(problems, c.checkCRD(obj)...), true
	}
	problems = append(problems, checkName(gvk.GroupKind(), obj.GetName(), c.target)...)
	switch {
	case c.crds[gvk.GroupKind()] != nil:
		return append(problems, c.checkCustomResource(obj, c.crds[gvk.GroupKind()])...), true
	case scheme.Scheme.IsGroupRegistered(gvk.Group):
		return append(problems, c.checkBuiltin(obj)...), true
	}
	return problems, false
}

// checkBuiltin checks an object of a group built into Kubernetes.
func (c *Checker) checkBuiltin(obj *unstructured.Unstructured) []Problem {
	gvk := obj.GroupVersionKind()
	if p := checkKnownKind(gvk); p != nil {
		return []Problem{*p}
	}
	problems := c.checkTyped(obj, fmt.Sprintf("%s %s in Kubernetes %s", gvk.GroupVersion(), gvk.Kind, kubernetesVersion))
	problems = append(problems, checkRequired(obj)...)
	problems = append(problems, checkEnums(obj)...)
	problems = append(problems, checkImages(obj)...)
	problems = append(problems, checkData(obj)...)
	return problems
}
