package render

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// configSchema is a manifest's configuration schema, ready to prune, default and validate
// with the semantics the API server applies to custom resources.
type configSchema struct {
	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaValidator
}

// newConfigSchema checks the manifest's schema. Its errors are the package author's, not the
// user's, so they are plain *Error pointing at the manifest.
func newConfigSchema(file string, in *apiextensionsv1.JSONSchemaProps) (*configSchema, Errors) {
	if in == nil {
		return nil, nil
	}
	const field0 = "spec.config.openAPIV3Schema"
	bad := func(field string, err error) Errors {
		return Errors{&Error{File: file, Field: field, Err: err}}
	}
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(in, internal, nil); err != nil {
		return nil, bad(field0, fmt.Errorf("convert schema: %w", err))
	}
	// The schema is checked as the API server checks a CustomResourceDefinition's (what Package
	// Operator's manifest validation does too): the same code, on a definition made to hold it.
	if errs := checkSchemaAsCRD(file, field0, internal); len(errs) > 0 {
		return nil, errs
	}
	structural, err := structuralschema.NewStructural(internal)
	if err != nil {
		return nil, bad(field0, fmt.Errorf("not a structural schema: %w", err))
	}
	var errs Errors
	for _, fe := range structuralschema.ValidateStructural(field.NewPath(field0), structural) {
		errs = append(errs, &Error{File: file, Field: fe.Field, Err: fmt.Errorf("not a structural schema: %s", fe.ErrorBody())})
	}
	if len(errs) > 0 {
		return nil, errs
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(internal)
	if err != nil {
		return nil, bad(field0, fmt.Errorf("build validator: %w", err))
	}
	return &configSchema{structural: structural, validator: validator}, nil
}

// checkSchemaAsCRD validates schema as the openAPIV3Schema of a CustomResourceDefinition and
// reports the errors under field0.
func checkSchemaAsCRD(file, field0 string, schema *apiextensions.JSONSchemaProps) Errors {
	const version = "v1"
	crd := &apiextensions.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "configs.package.pkgsync.dev"},
		Spec: apiextensions.CustomResourceDefinitionSpec{
			Group:                 "package.pkgsync.dev",
			Names:                 apiextensions.CustomResourceDefinitionNames{Plural: "configs", Singular: "config", Kind: "Config", ListKind: "ConfigList"},
			Scope:                 apiextensions.NamespaceScoped,
			Versions:              []apiextensions.CustomResourceDefinitionVersion{{Name: version, Served: true, Storage: true}},
			Validation:            &apiextensions.CustomResourceValidation{OpenAPIV3Schema: schema},
			Conversion:            &apiextensions.CustomResourceConversion{Strategy: apiextensions.NoneConverter},
			PreserveUnknownFields: ptr.To(false),
		},
		Status: apiextensions.CustomResourceDefinitionStatus{StoredVersions: []string{version}},
	}
	const prefix = "spec.validation.openAPIV3Schema"
	var errs Errors
	for _, fe := range apiextensionsvalidation.ValidateCustomResourceDefinition(context.Background(), crd) {
		f, ok := strings.CutPrefix(fe.Field, prefix)
		if !ok {
			f = fe.Field // not the schema's: a bug of this function, still reported
		}
		errs = append(errs, &Error{File: file, Field: field0 + f, Err: errors.New(fe.ErrorBody())})
	}
	return errs
}

// apply decodes the configuration, prunes unknown fields, applies defaults and validates it:
// the order in which the API server treats a custom resource. Every violation is a *ConfigError.
// A Package Operator package's configuration (pko) is pruned as Package Operator prunes it: as
// the root of a resource (apiVersion, kind and metadata are kept), and entirely when the package
// has no schema. Every key pruned is a warning, returned whether or not the configuration is
// valid: a dropped key is often why a required one is missing.
func (s *configSchema) apply(raw []byte, pko bool) (map[string]any, []Warning, Errors) {
	cfg, errs := decodeConfig(raw)
	if errs != nil {
		return nil, nil, errs
	}
	if s == nil {
		if pko {
			return map[string]any{}, unschematized(cfg), nil
		}
		// Without a schema there is nothing to check against; the configuration is passed on.
		return cfg, nil, nil
	}
	warnings := pruneConfig(cfg, s.structural, pko)
	structuraldefaulting.Default(cfg, s.structural)
	if errs := s.validate(cfg); len(errs) > 0 {
		return nil, warnings, errs
	}
	return cfg, warnings, nil
}

// decodeConfig decodes a configuration: a JSON or YAML object, {} when raw is empty.
func decodeConfig(raw []byte) (map[string]any, Errors) {
	cfg := map[string]any{}
	if len(raw) == 0 {
		return cfg, nil
	}
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, Errors{&ConfigError{Detail: fmt.Sprintf("decode: %v", err)}}
	}
	var v any
	// apimachinery's json keeps integers as int64, which the schema validator needs.
	if err := utiljson.Unmarshal(js, &v); err != nil {
		return nil, Errors{&ConfigError{Detail: fmt.Sprintf("decode: %v", err)}}
	}
	switch v := v.(type) {
	case nil:
		return cfg, nil
	case map[string]any:
		return v, nil
	default:
		return nil, Errors{&ConfigError{Field: "config", Detail: "must be an object"}}
	}
}

// validate checks a configuration against the schema as it is, without pruning or defaults.
func (s *configSchema) validate(cfg map[string]any) Errors {
	fieldErrs := apiservervalidation.ValidateCustomResource(field.NewPath("config"), cfg, s.validator)
	// The validator walks maps, so its order varies from run to run; sort for stable output.
	slices.SortStableFunc(fieldErrs, func(a, b *field.Error) int {
		return cmp.Or(cmp.Compare(a.Field, b.Field), cmp.Compare(a.ErrorBody(), b.ErrorBody()))
	})
	var errs Errors
	for _, fe := range fieldErrs {
		errs = append(errs, &ConfigError{Field: fe.Field, Detail: fe.ErrorBody(), missing: fe.Type == field.ErrorTypeRequired})
	}
	return errs
}
