package render

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/lru"
	"sigs.k8s.io/yaml"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

const (
	pkoManifestAPIVersion = v1alpha1.PackageOperatorManifestAPIVersion
	pkoPhaseAnnotation    = v1alpha1.PackageOperatorPhaseAnnotation
)

// manifestFiles are the names a manifest may have, and lock files that are not objects.
var manifestFiles = []string{"manifest.yaml", "manifest.yml"}

var ignoredRootFiles = sets.New("manifest.yaml", "manifest.yml", "manifest.lock.yaml", "manifest.lock.yml")

// readManifest finds, decodes and checks the package manifest, in either format, strictly.
func readManifest(fsys fs.FS) (*v1alpha1.PackageManifest, string, Errors) {
	m, name, _, errs := readManifestFormat(fsys)
	return m, name, errs
}

// readManifestFormat is readManifest, also telling whether the manifest is Package Operator's.
func readManifestFormat(fsys fs.FS) (*v1alpha1.PackageManifest, string, bool, Errors) {
	var name string
	var data []byte
	for _, n := range manifestFiles {
		b, err := fs.ReadFile(fsys, n)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, n, false, Errors{&Error{File: n, Err: fmt.Errorf("read manifest: %w", err)}}
		}
		name, data = n, b
		break
	}
	if name == "" {
		return nil, "", false, Errors{&Error{File: "manifest.yaml", Err: errors.New("missing: a package needs a manifest.yaml at its root (or in package/, as in a Package Operator image)")}}
	}
	key := manifestKey(name, data)
	if kept, ok := decodedManifests.Get(key); ok {
		d := kept.(decodedManifest)
		return d.manifest.DeepCopy(), name, d.pko, nil
	}
	m, pko, errs := decodeManifest(name, data)
	if len(errs) == 0 {
		decodedManifests.Add(key, decodedManifest{manifest: m.DeepCopy(), pko: pko})
	}
	return m, name, pko, errs
}

// decodedManifests keeps the manifests decoded lately, by file name and content: every render
// of a package reads its manifest (twice: to select a component, and to render), and a fleet
// renders one package once per Package, each with its own configuration. Only manifests that
// decoded without an error are kept; what is kept depends on the bytes alone, so a caller is
// served only what it would have decoded itself.
var decodedManifests = lru.New(128)

type decodedManifest struct {
	manifest *v1alpha1.PackageManifest
	pko      bool
}

func manifestKey(name string, data []byte) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write(data)
	var key [sha256.Size]byte
	copy(key[:], h.Sum(nil))
	return key
}

// decodeManifest decodes and checks the manifest file name holding data, in either format.
func decodeManifest(name string, data []byte) (*v1alpha1.PackageManifest, bool, Errors) {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(data, &head); err != nil {
		return nil, false, Errors{yamlError(name, document{index: 1, startLine: 1}, err)}
	}
	if head.Kind != v1alpha1.PackageManifestKind {
		return nil, false, Errors{&Error{File: name, Field: "kind", Err: fmt.Errorf("must be %s, not %q", v1alpha1.PackageManifestKind, head.Kind)}}
	}
	m := &v1alpha1.PackageManifest{}
	var pkoErrs Errors
	var err error
	switch head.APIVersion {
	case v1alpha1.GroupVersion.String():
		err = yaml.UnmarshalStrict(data, m)
	case pkoManifestAPIVersion:
		// Package Operator's format is decoded strictly too, against every field of its own
		// type: a typo is refused by name rather than silently ignored.
		var pm pkoManifest
		if err = yaml.UnmarshalStrict(data, &pm); err == nil {
			m.TypeMeta, m.ObjectMeta, m.Spec, m.Test = pm.TypeMeta, pm.ObjectMeta, pm.Spec.PackageManifestSpec, pm.Test
			pkoErrs = checkPKOManifest(name, &pm)
		}
		for i := range m.Spec.Phases {
			if m.Spec.Phases[i].Class == pkoDefaultClass {
				m.Spec.Phases[i].Class = "" // Package Operator's built-in controller: the management cluster
			}
		}
	default:
		return nil, false, Errors{&Error{File: name, Field: "apiVersion", Err: fmt.Errorf("must be %s (or %s), not %q", v1alpha1.GroupVersion, pkoManifestAPIVersion, head.APIVersion)}}
	}
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "error unmarshaling JSON: while decoding JSON: ")
		return nil, false, Errors{&Error{File: name, Err: fmt.Errorf("decode manifest: %s", msg)}}
	}
	if unsupported := pkoErrs.unsupported(); len(unsupported) > 0 {
		return nil, false, unsupported
	}
	m.APIVersion = v1alpha1.GroupVersion.String()
	return m, head.APIVersion == pkoManifestAPIVersion, append(checkManifest(name, m), pkoErrs...)
}

// checkManifest reports every inconsistency of a decoded manifest.
func checkManifest(file string, m *v1alpha1.PackageManifest) Errors {
	var errs Errors
	bad := func(field, format string, args ...any) {
		errs = append(errs, &Error{File: file, Field: field, Err: fmt.Errorf(format, args...)})
	}
	if m.Name == "" {
		bad("metadata.name", "required")
	}
	if len(m.Spec.Phases) == 0 {
		bad("spec.phases", "required: a package needs at least one phase")
	}
	phases := sets.New[string]()
	for i, p := range m.Spec.Phases {
		field := fmt.Sprintf("spec.phases[%d]", i)
		switch {
		case p.Name == "":
			bad(field+".name", "required")
		case phases.Has(p.Name):
			bad(field+".name", "duplicate phase %q", p.Name)
		}
		phases.Insert(p.Name)
		if p.Class != "" && p.Class != v1alpha1.ClassHostedCluster {
			bad(field+".class", "unsupported class %q: use %q for the hosted cluster or leave it empty for the management cluster", p.Class, v1alpha1.ClassHostedCluster)
		}
	}
	for i, s := range m.Spec.Scopes {
		if s != v1alpha1.ScopeCluster && s != v1alpha1.ScopeNamespaced {
			bad(fmt.Sprintf("spec.scopes[%d]", i), "must be %s or %s, not %q", v1alpha1.ScopeCluster, v1alpha1.ScopeNamespaced, s)
		}
	}
	images := sets.New[string]()
	for i, img := range m.Spec.Images {
		field := fmt.Sprintf("spec.images[%d]", i)
		switch {
		case img.Name == "":
			bad(field+".name", "required")
		case images.Has(img.Name):
			bad(field+".name", "duplicate image %q", img.Name)
		}
		images.Insert(img.Name)
		if img.Image == "" {
			bad(field+".image", "required")
		}
	}
	for i, ap := range m.Spec.AvailabilityProbes {
		field := fmt.Sprintf("spec.availabilityProbes[%d]", i)
		if ap.Selector.Kind == nil && ap.Selector.Selector == nil {
			bad(field+".selector", "required: select objects by kind, by labels or both")
		}
		if ap.Selector.Kind != nil && ap.Selector.Kind.Kind == "" {
			bad(field+".selector.kind.kind", "required")
		}
		if len(ap.Probes) == 0 {
			bad(field+".probes", "required: at least one probe")
		}
		for j, p := range ap.Probes {
			pf := fmt.Sprintf("%s.probes[%d]", field, j)
			n := 0
			if p.Condition != nil {
				n++
				if p.Condition.Type == "" {
					bad(pf+".condition.type", "required")
				}
				if s := p.Condition.Status; s != "True" && s != "False" && s != "Unknown" {
					bad(pf+".condition.status", "must be True, False or Unknown, not %q", s)
				}
			}
			if p.FieldsEqual != nil {
				n++
				if p.FieldsEqual.FieldA == "" || p.FieldsEqual.FieldB == "" {
					bad(pf+".fieldsEqual", "fieldA and fieldB are required")
				}
			}
			if p.CEL != nil {
				n++
				if p.CEL.Rule == "" {
					bad(pf+".cel.rule", "required")
				}
			}
			if n != 1 {
				bad(pf, "exactly one of condition, fieldsEqual or cel must be set")
			}
		}
	}
	for i, r := range m.Spec.IgnoreFields {
		field := fmt.Sprintf("spec.ignoreFields[%d]", i)
		if r.Kind == "" {
			bad(field+".kind", "required")
		}
		if len(r.JSONPointers) == 0 {
			bad(field+".jsonPointers", "required: name at least one field, such as /spec/replicas")
		}
		for j, p := range r.JSONPointers {
			if _, err := v1alpha1.ParseJSONPointer(p); err != nil {
				bad(fmt.Sprintf("%s.jsonPointers[%d]", field, j), "%w", err)
			}
		}
	}
	return append(errs, checkTests(file, m)...)
}

// errUnsupported marks the Package Operator fields pkgsync does not implement.
var errUnsupported = errors.New("not supported")

// unsupported returns the errors of fields pkgsync does not implement: a manifest using them is
// refused with them alone, before anything else is checked.
func (errs Errors) unsupported() Errors {
	var out Errors
	for _, err := range errs {
		if errors.Is(err, errUnsupported) {
			out = append(out, err)
		}
	}
	return out
}

// checkPKOManifest applies the rules Package Operator's manifest validation has and pkgsync's
// own format does not, and refuses the fields pkgsync does not implement, so that a package
// relying on them fails loudly instead of installing without them.
func checkPKOManifest(file string, pm *pkoManifest) Errors {
	var errs Errors
	bad := func(field string, err error) {
		errs = append(errs, &Error{File: file, Field: field, Err: err})
	}
	noDeps := fmt.Errorf("%w: pkgsync does not resolve or install package dependencies; install each package with its own Package", errUnsupported)
	if len(pm.Spec.Dependencies) > 0 {
		bad("spec.dependencies", noDeps)
	}
	if len(pm.Spec.Repositories) > 0 {
		bad("spec.repositories", noDeps)
	}
	if len(errs) > 0 {
		return errs
	}
	// Package Operator requires scopes. pkgsync's own format may leave them out: such a package
	// installs in either scope.
	if len(pm.Spec.Scopes) == 0 {
		bad("spec.scopes", fmt.Errorf("required: list where the package may be installed: %s and/or %s", v1alpha1.ScopeNamespaced, v1alpha1.ScopeCluster))
	}
	return errs
}

// checkTests checks the test section, in both formats: case names (unique directories in
// FixturesDir), the kubeconform settings and every case's configuration.
func checkTests(file string, m *v1alpha1.PackageManifest) Errors {
	var errs Errors
	bad := func(field string, err error) {
		errs = append(errs, &Error{File: file, Field: field, Err: err})
	}
	names := sets.New[string]()
	for i, tc := range m.Test.Template {
		field := fmt.Sprintf("test.template[%d].name", i)
		switch msgs := validation.IsConfigMapKey(tc.Name); {
		case len(msgs) > 0:
			bad(field, fmt.Errorf("%q: a case name is a directory name in %s: %s", tc.Name, FixturesDir, strings.Join(msgs, "; ")))
		case names.Has(tc.Name):
			bad(field, fmt.Errorf("duplicate case %q", tc.Name))
		}
		names.Insert(tc.Name)
	}
	if kc := m.Test.Kubeconform; kc != nil && kc.KubernetesVersion == "" {
		bad("test.kubeconform.kubernetesVersion", errors.New("required"))
	}
	return append(errs, checkTestConfigs(file, m)...)
}

// checkTestConfigs validates the configuration of every test case against the manifest's
// schema, as Package Operator does whenever it loads a package: a case whose configuration the
// package itself would refuse makes the package invalid. As there, the configuration is
// validated as written, before pruning and defaults. A broken schema is reported by the render,
// not here.
func checkTestConfigs(file string, m *v1alpha1.PackageManifest) Errors {
	if len(m.Test.Template) == 0 || m.Spec.Config.OpenAPIV3Schema == nil {
		return nil
	}
	schema, schemaErrs := newConfigSchema(file, m.Spec.Config.OpenAPIV3Schema)
	if len(schemaErrs) > 0 {
		return nil
	}
	var errs Errors
	for i, tc := range m.Test.Template {
		var raw []byte
		if tc.Context.Config != nil {
			raw = tc.Context.Config.Raw
		}
		cfg, cfgErrs := decodeConfig(raw)
		if cfgErrs == nil {
			cfgErrs = schema.validate(cfg)
		}
		for _, err := range cfgErrs {
			field := fmt.Sprintf("test.template[%d].context.config", i)
			var ce *ConfigError
			if errors.As(err, &ce) {
				errs = append(errs, &Error{File: file, Field: field + strings.TrimPrefix(ce.Field, "config"), Err: errors.New(ce.Detail)})
			}
		}
	}
	return errs
}
