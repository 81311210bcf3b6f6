package schema

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
)

// crdGroupKind is the kind of a CustomResourceDefinition, which client-go's scheme lacks.
var crdGroupKind = schema.GroupKind{Group: apiextensionsv1.GroupName, Kind: "CustomResourceDefinition"}

// customKind is the kind a CustomResourceDefinition defines: the schema of each version.
type customKind struct {
	groupKind schema.GroupKind
	crd       string
	versions  map[string]*customVersion
}

// customVersion is one version's schema, ready to prune, default and validate as the API
// server does (the code render's configuration schema uses too).
type customVersion struct {
	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaValidator
	// rules evaluates the schema's x-kubernetes-validations; nil when it has none.
	rules *cel.Validator
}

// decodeCRD decodes a CustomResourceDefinition strictly and defaults it as the API server
// does.
func decodeCRD(obj *unstructured.Unstructured) (*apiextensionsv1.CustomResourceDefinition, error) {
	if obj.GetAPIVersion() != apiextensionsv1.SchemeGroupVersion.String() {
		return nil, fmt.Errorf("%s is not an API version of Kubernetes %s: write %s", obj.GetAPIVersion(), kubernetesVersion, apiextensionsv1.SchemeGroupVersion)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, crd, true); err != nil {
		return nil, err
	}
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(crd)
	return crd, nil
}

// newCustomKind reads the schemas of a CustomResourceDefinition.
func newCustomKind(obj *unstructured.Unstructured) (*customKind, error) {
	crd, err := decodeCRD(obj)
	if err != nil {
		return nil, err
	}
	k := &customKind{
		groupKind: schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind},
		crd:       crd.Name,
		versions:  map[string]*customVersion{},
	}
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		cv := &customVersion{}
		if v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
			if cv, err = newCustomVersion(v.Schema.OpenAPIV3Schema); err != nil {
				return nil, fmt.Errorf("version %s: %w", v.Name, err)
			}
		}
		k.versions[v.Name] = cv
	}
	return k, nil
}

func newCustomVersion(in *apiextensionsv1.JSONSchemaProps) (*customVersion, error) {
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(in, internal, nil); err != nil {
		return nil, fmt.Errorf("convert schema: %w", err)
	}
	structural, err := structuralschema.NewStructural(internal)
	if err != nil {
		return nil, fmt.Errorf("not a structural schema: %w", err)
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(internal)
	if err != nil {
		return nil, fmt.Errorf("build validator: %w", err)
	}
	// The API server's limits bound each rule and all of them (celconfig): a rule that would
	// run longer there is stopped here too.
	rules := cel.NewValidator(structural, true, celconfig.PerCallLimit)
	return &customVersion{structural: structural, validator: validator, rules: rules}, nil
}

var unknownFieldRE = regexp.MustCompile(`^unknown field "(.*)"$`)

// checkCRD checks a CustomResourceDefinition as the API server checks one it is asked to
// create: its fields, then ValidateCustomResourceDefinition (names, versions, schemas).
func (c *Checker) checkCRD(obj *unstructured.Unstructured) []Problem {
	crd, err := decodeCRD(obj)
	strict, isStrict := runtime.AsStrictDecodingError(err)
	switch {
	case isStrict:
		var problems []Problem
		for _, e := range strict.Errors() {
			if m := unknownFieldRE.FindStringSubmatch(e.Error()); m != nil {
				problems = append(problems, Problem{Field: m[1], Detail: "unknown field: a CustomResourceDefinition has no such field (check its spelling and indentation)"})
				continue
			}
			problems = append(problems, Problem{Detail: e.Error()})
		}
		return problems
	case err != nil && obj.GetAPIVersion() != apiextensionsv1.SchemeGroupVersion.String():
		return []Problem{{Field: "apiVersion", Detail: err.Error()}}
	case err != nil:
		return []Problem{{Detail: fmt.Sprintf("not a CustomResourceDefinition: %v", err)}}
	}
	internal := &apiextensions.CustomResourceDefinition{}
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(crd, internal, nil); err != nil {
		return []Problem{{Detail: fmt.Sprintf("convert: %v", err)}}
	}
	// The API server records the storage version when it creates the definition.
	internal.Status.StoredVersions = nil
	for _, v := range internal.Spec.Versions {
		if v.Storage {
			internal.Status.StoredVersions = append(internal.Status.StoredVersions, v.Name)
		}
	}
	return fieldProblems(apiextensionsvalidation.ValidateCustomResourceDefinition(context.Background(), internal))
}

// checkCustomResource checks a custom resource as the API server would: a version the
// definition serves, no field its schema does not declare (the API server drops them, or
// refuses the object under strict field validation), and, after the schema's defaults, a
// valid object, its x-kubernetes-validations rules too. Its metadata is checked with the built-in ObjectMeta schema
// (its name, as every object's, by Check).
func (c *Checker) checkCustomResource(obj *unstructured.Unstructured, k *customKind) []Problem {
	gvk := obj.GroupVersionKind()
	v, ok := k.versions[gvk.Version]
	if !ok {
		served := make([]string, 0, len(k.versions))
		for name := range k.versions {
			served = append(served, name)
		}
		slices.Sort(served)
		return []Problem{{Field: "apiVersion", Detail: fmt.Sprintf("CustomResourceDefinition %s serves %s, not %s",
			k.crd, strings.Join(served, ", "), gvk.Version)}}
	}
	problems := c.checkCustomMetadata(obj)
	if v.structural == nil {
		return problems // no schema: anything goes
	}
	u := obj.DeepCopy().Object
	unknown := structuralpruning.PruneWithOptions(u, v.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	for _, f := range unknown {
		if f == "status" {
			// Written by generators (status: {}) and ignored on create by a definition with a
			// status subresource: not what a package author means to set.
			continue
		}
		problems = append(problems, Problem{Field: f, Detail: fmt.Sprintf(
			"unknown field: the schema of %s in CustomResourceDefinition %s has no such field (check its spelling and indentation)", gvk.Version, k.crd)})
	}
	structuraldefaulting.Default(u, v.structural)
	errs := apiservervalidation.ValidateCustomResource(nil, u, v.validator)
	if v.rules != nil {
		// No old object: transition rules (oldSelf) are not evaluated, as on create.
		ruleErrs, _ := v.rules.Validate(context.Background(), nil, v.structural, u, nil, celconfig.RuntimeCELCostBudget)
		errs = append(errs, ruleErrs...)
	}
	return append(problems, sortedProblems(fieldProblems(errs))...)
}

// checkCustomMetadata checks a custom resource's metadata with the built-in schema of
// ObjectMeta, which the API server decodes it into: it does so on a ConfigMap holding that
// metadata and nothing else, the smallest built-in kind that has it.
func (c *Checker) checkCustomMetadata(obj *unstructured.Unstructured) []Problem {
	meta, ok := obj.Object["metadata"]
	if !ok {
		return nil
	}
	holder := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}}
	return c.checkTyped(holder, "metadata (ObjectMeta)")
}
