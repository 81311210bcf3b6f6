package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/kustomize/kyaml/openapi"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/applier"
	"pkgsync.dev/pkgsync/render"
)

// installScope is validate's --scope: which resource installs the package, checked as the
// controller checks it. A Package (Namespaced, implied by -n) is refused when the manifest's
// spec.scopes leaves out Namespaced, and, started without --allow-cross-namespace, confined to
// its namespace on the management cluster (internal/applier sets apply.Request.Confine,
// apply/confine.go refuses); a ClusterPackage (Cluster) is refused when spec.scopes leaves out
// Cluster. Without -n or --scope nothing of this is checked.
type installScope struct {
	scope string
}

func (s *installScope) ApplyFlags(fs *pflag.FlagSet) {
	fs.StringVar(&s.scope, "scope", "", "Check the package as a Package (Namespaced, implied by -n) or a ClusterPackage (Cluster) installs it: "+
		"the manifest's spec.scopes and, for a Package, the objects the controller confines to its namespace")
}

// resolve returns the scope to check for a Package in namespace ("" for a ClusterPackage), or
// "" for none.
func (s *installScope) resolve(namespace string) (v1alpha1.PackageScope, error) {
	switch v1alpha1.PackageScope(s.scope) {
	case "":
		if namespace != "" {
			return v1alpha1.ScopeNamespaced, nil
		}
		return "", nil
	case v1alpha1.ScopeNamespaced:
		if namespace == "" {
			return "", usageError("--scope Namespaced is a Package's, which has a namespace: give -n NAMESPACE")
		}
		return v1alpha1.ScopeNamespaced, nil
	case v1alpha1.ScopeCluster:
		if namespace != "" {
			return "", usageError("--scope Cluster is a ClusterPackage's, which has no namespace: drop -n")
		}
		return v1alpha1.ScopeCluster, nil
	}
	return "", usageError("--scope must be %s or %s, not %q", v1alpha1.ScopeNamespaced, v1alpha1.ScopeCluster, s.scope)
}

// installProblems renders the package as validate does (cfg) and returns what the controller
// would refuse of it installed in scope, by a Package in opts.Namespace or a ClusterPackage:
// the manifest's scopes, and a Package's objects outside its namespace. The render's own
// problems are validate's to report, not these.
func installProblems(ctx context.Context, fsys fs.FS, opts render.Options, cfg render.ValidateConfig, scope v1alpha1.PackageScope) (render.Errors, error) {
	if scope == "" {
		return nil, nil
	}
	located, err := render.RenderLocated(ctx, fsys, opts, cfg)
	if located == nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	var problems render.Errors
	if located.Manifest != nil {
		if err := applier.CheckScopes(located.Manifest, scope == v1alpha1.ScopeNamespaced); err != nil {
			problems = append(problems, &render.Error{File: located.ManifestFile, Field: "spec.scopes", Err: scopesHint(err, scope)})
		}
	}
	if scope == v1alpha1.ScopeNamespaced && located.Result != nil {
		problems = append(problems, confinementProblems(located, opts.Namespace)...)
	}
	return problems, nil
}

// scopesHint says how to mend a scope the manifest does not list.
func scopesHint(err error, scope v1alpha1.PackageScope) error {
	if scope == v1alpha1.ScopeNamespaced {
		return fmt.Errorf("%w: add %s to spec.scopes, or install it with a ClusterPackage (--scope Cluster)", err, scope)
	}
	return fmt.Errorf("%w: add %s to spec.scopes, or install it with a Package (-n NAMESPACE)", err, scope)
}

// confinementProblems are the objects of the management cluster's phases that a Package in
// namespace may not create: cluster-scoped kinds, and objects in another namespace. It restates
// apply/confine.go's rules offline: a kind's scope comes from the package's own
// CustomResourceDefinitions, else from kustomize's table of Kubernetes' kinds
// (kyaml/openapi.IsNamespaceScoped, the one kustomize's namespace transformer uses); a kind
// neither knows is checked only by its namespace. The hosted cluster's phases are not confined.
func confinementProblems(located *render.Located, namespace string) render.Errors {
	crdScopes := packageCRDScopes(located.Result)
	var problems render.Errors
	for _, ph := range located.Result.Phases {
		if ph.Class != "" {
			continue
		}
		for _, obj := range ph.Objects {
			field, err := confinementError(obj, namespace, crdScopes)
			if err == nil {
				continue
			}
			e := &render.Error{Field: field, Err: err}
			if at := located.Origin(obj); at != nil {
				e.File, e.Document, e.Line = at.File, at.Document, at.Line
			}
			problems = append(problems, e)
		}
	}
	return problems
}

// confinementHint is how to install what a namespaced Package may not, in the controller's
// words (internal/applier).
const confinementHint = "install the package with a ClusterPackage (--scope Cluster), or start the controller with --allow-cross-namespace"

// confinementError says why a Package in namespace may not create obj on the management
// cluster, and the field at fault; nil when it may.
func confinementError(obj *unstructured.Unstructured, namespace string, crdScopes map[schema.GroupKind]bool) (string, error) {
	gvk := obj.GroupVersionKind()
	namespaced, known := crdScopes[gvk.GroupKind()]
	if !known {
		namespaced, known = openapi.IsNamespaceScoped(kyaml.TypeMeta{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind()})
	}
	switch ns := obj.GetNamespace(); {
	case known && !namespaced:
		return "kind", fmt.Errorf("%s %s is cluster-scoped, and a Package in namespace %s may only create objects in its own namespace on the management cluster: %s",
			obj.GetKind(), obj.GetName(), namespace, confinementHint)
	case ns != "" && ns != namespace:
		return "metadata.namespace", fmt.Errorf("%s %s/%s is in namespace %s, outside the Package's namespace %s, to which the controller confines it on the management cluster: "+
			"remove metadata.namespace (the object then goes to %s), or %s", obj.GetKind(), ns, obj.GetName(), ns, namespace, namespace, confinementHint)
	}
	return "", nil
}

// packageCRDScopes maps the kinds the package's CustomResourceDefinitions define to whether
// they are namespaced.
func packageCRDScopes(res *render.Result) map[schema.GroupKind]bool {
	scopes := map[schema.GroupKind]bool{}
	for _, ph := range res.Phases {
		for _, obj := range ph.Objects {
			if obj.GroupVersionKind().GroupKind() != (schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}) {
				continue
			}
			group, _, _ := unstructured.NestedString(obj.Object, "spec", "group")
			kind, _, _ := unstructured.NestedString(obj.Object, "spec", "names", "kind")
			scope, _, _ := unstructured.NestedString(obj.Object, "spec", "scope")
			if kind != "" {
				scopes[schema.GroupKind{Group: group, Kind: kind}] = scope != "Cluster"
			}
		}
	}
	return scopes
}

// warnInstallScope writes, for render -n, what the controller would refuse of a Package in that
// namespace as warnings: render's output may go to kubectl rather than to a Package, so they do
// not fail it. Nothing without -n.
func warnInstallScope(ctx context.Context, stderr io.Writer, fsys fs.FS, opts render.Options) error {
	if opts.Namespace == "" {
		return nil
	}
	if ctx == nil {
		ctx = context.Background()
	}
	problems, err := installProblems(ctx, fsys, opts, render.WithConfig, v1alpha1.ScopeNamespaced)
	if err != nil {
		return fmt.Errorf("check the objects against namespace %s: %w", opts.Namespace, err)
	}
	for _, p := range problems {
		fmt.Fprintln(stderr, "Warning:", p)
	}
	return nil
}
