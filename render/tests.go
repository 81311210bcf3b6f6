package render

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/render/schema"
)

// FixturesDir is where a package keeps the expected renders of its test.template cases, next
// to its manifest (a component's next to the component's manifest), as Package Operator lays
// them out: FixturesDir/CASE/PATH holds the render of the package file PATH (a template under
// its name without .gotmpl). As a dot-directory it is never part of a render.
const FixturesDir = ".test-fixtures"

// TestImage is what every image of spec.images renders as in a test case, as in Package
// Operator's template tests: fixtures do not change when an image is locked to a new digest.
const TestImage = "registry.package-operator.run/static-image"

// TestCase is one test.template case of a manifest: a name and the render options its context
// gives.
type TestCase struct {
	// Name of the case; its fixtures are in FixturesDir/NAME/.
	Name string
	// Options are the render options of the case's context.
	Options Options
	// CheckObjects asks RenderTestCase to check the objects rendered as ValidatePackage checks
	// them: what the manifest's test.kubeconform asks of Package Operator's tooling.
	CheckObjects bool
	// KubernetesVersion is test.kubeconform.kubernetesVersion: the objects are checked for that
	// release as far as the checker knows it (schema.Checker.For, the schemas being its own).
	KubernetesVersion string
}

// release is the Kubernetes release the case's objects are checked for: that of
// KubernetesVersion, the checker's own when it names none (kubeconform's "master").
func (tc TestCase) release() schema.Release {
	r, _ := schema.ParseRelease(tc.KubernetesVersion)
	return r
}

// TemplateTests are the test cases of a package's manifest (test.template, as Package
// Operator's tooling reads them) and what of the manifest's test section pkgsync does
// otherwise than asked (test.kubeconform's version and schema locations), to be reported.
type TemplateTests struct {
	// Dir is the directory of the manifest within the tree: "." or "package" (Package
	// Operator's image layout), followed by components/NAME for a component. Fixtures live in
	// Dir/FixturesDir.
	Dir string
	// Component is the component the cases are of, empty for the root package.
	Component string
	// Cases in the manifest's order.
	Cases []TestCase
	// Notes name the parts of the test section that are not run as written, with why.
	Notes []string
}

// ReadTemplateTests reads the test section of a package's manifest.
func ReadTemplateTests(fsys fs.FS) (*TemplateTests, error) {
	return ReadComponentTemplateTests(fsys, "")
}

// ReadAllTemplateTests reads the test sections of the root package and, in a multi-component
// package, of every component: Package Operator runs them all.
func ReadAllTemplateTests(fsys fs.FS) ([]*TemplateTests, error) {
	root, err := ReadTemplateTests(fsys)
	if err != nil {
		return nil, err
	}
	out := []*TemplateTests{root}
	pkg, _, err := packageRoot(fsys)
	if err != nil {
		return nil, err
	}
	if m, _, errs := readManifest(pkg); m == nil || len(errs) > 0 || m.Spec.Components == nil {
		return out, nil
	}
	names, errs := componentNames(pkg)
	if len(errs) > 0 {
		return nil, errs
	}
	for _, name := range names {
		tests, err := ReadComponentTemplateTests(fsys, name)
		if err != nil {
			return nil, err
		}
		out = append(out, tests)
	}
	return out, nil
}

// ReadComponentTemplateTests reads the test section of a component's manifest; the empty
// name is the root package.
func ReadComponentTemplateTests(fsys fs.FS, component string) (*TemplateTests, error) {
	root, rootDir, err := packageRoot(fsys)
	if err != nil {
		return nil, err
	}
	c, errs := selectComponent(root, component)
	if len(errs) > 0 {
		return nil, errs
	}
	out := &TemplateTests{Dir: path.Join(rootDir, c.prefix), Component: component}
	root = c.fsys
	m, _, errs := readManifest(root)
	if m == nil || len(errs) > 0 {
		return nil, c.rebase(errs)
	}
	// readManifest checked the section: case names are unique fixture directories.
	for _, tc := range m.Test.Template {
		c := tc.Context
		opts := Options{
			Component: component,
			Name:      c.Package.Metadata.Name, Namespace: c.Package.Metadata.Namespace,
			Labels: c.Package.Metadata.Labels, Annotations: c.Package.Metadata.Annotations,
			Image: c.Package.Image, Environment: Environment{KubernetesVersion: c.Environment.Kubernetes.Version},
		}
		if c.Config != nil {
			opts.Config = c.Config.Raw
		}
		if o := c.Environment.OpenShift; o != nil {
			opts.Environment.OpenShiftVersion = o.Version
			if o.Managed != nil {
				opts.Environment.OpenShiftManaged = &ManagedOpenShift{Data: o.Managed.Data}
			}
		}
		if p := c.Environment.Proxy; p != nil {
			opts.Environment.Proxy = &Proxy{HTTPProxy: p.HTTPProxy, HTTPSProxy: p.HTTPSProxy, NoProxy: p.NoProxy}
		}
		opts.Environment.HyperShift = c.Environment.HyperShift != nil
		if hs := c.Environment.HyperShift; hs != nil && hs.HostedCluster != nil {
			hc := hs.HostedCluster
			opts.Environment.HostedCluster = &HostedCluster{
				Name: hc.Metadata.Name, Namespace: hc.Metadata.Namespace, HostedClusterNamespace: hc.HostedClusterNamespace,
				Labels: hc.Metadata.Labels, Annotations: hc.Metadata.Annotations, NodeSelector: hc.NodeSelector,
			}
		}
		tcase := TestCase{Name: tc.Name, Options: opts}
		if kc := m.Test.Kubeconform; kc != nil {
			tcase.CheckObjects, tcase.KubernetesVersion = true, kc.KubernetesVersion
		}
		out.Cases = append(out.Cases, tcase)
	}
	out.Notes = kubeconformNotes(m.Test.Kubeconform)
	return out, nil
}

// RenderTestCase renders a test case as Package Operator's template tests do: every image of
// spec.images is TestImage (the lock file is checked, its digests not used), and the result's Files holds each YAML file
// of the package as rendered, for comparison with the case's fixtures. With tc.CheckObjects
// the objects rendered are checked too, their problems returned in Errors.
func RenderTestCase(ctx context.Context, fsys fs.FS, tc TestCase) (*Result, error) {
	m := mode{testCase: true}
	if tc.CheckObjects {
		m.placed = &placedObjects{}
	}
	res, err := renderWarning(ctx, fsys, tc.Options, m)
	if err != nil || m.placed == nil {
		return res, err
	}
	checks := m.placed.check(nil, tc.release())
	if len(checks.problems) > 0 {
		return nil, checks.problems
	}
	res.NotChecked = checks.notChecked
	return res, nil
}

// kubeconformNotes say how a test.kubeconform section is run where pkgsync runs it otherwise
// than Package Operator (which runs kubeconform, fetching the schemas of kubernetesVersion from
// schemaLocations): offline, against the schemas pkgsync embeds (one Kubernetes release's, those
// of the client-go it is built with) with the rules of kubernetesVersion's release it knows, and
// the package's own CustomResourceDefinitions. A schema location that cannot be used offline is
// named, with what is checked instead.
func kubeconformNotes(kc *v1alpha1.PackageManifestTestKubeconform) []string {
	if kc == nil {
		return nil
	}
	have := schema.KubernetesVersion()
	var notes []string
	target, ok := schema.ParseRelease(kc.KubernetesVersion)
	switch {
	case !ok:
		notes = append(notes, fmt.Sprintf("test.kubeconform.kubernetesVersion: %q is not a Kubernetes release pkgsync knows (MAJOR.MINOR[.PATCH]): "+
			"objects are checked offline against Kubernetes %s's schemas, the ones pkgsync embeds", kc.KubernetesVersion, have))
	case target.BuiltIn():
		// Checked as asked: nothing to note.
	default:
		note := fmt.Sprintf("test.kubeconform.kubernetesVersion: Kubernetes %s's schemas are not available offline (pkgsync embeds %s's only): "+
			"objects are checked against Kubernetes %s's schemas", target, have, have)
		if rules := schema.ReleaseRules(target); len(rules) > 0 {
			note += fmt.Sprintf(", with the rules of %s pkgsync knows: %s", target, strings.Join(rules, "; "))
		}
		notes = append(notes, note)
	}
	for i, loc := range kc.SchemaLocations {
		if note := schemaLocationNote(loc); note != "" {
			notes = append(notes, fmt.Sprintf("test.kubeconform.schemaLocations[%d]: %s: %s", i, loc, note))
		}
	}
	return notes
}

// kubernetesSchemaLocations are the locations of kubeconform's schemas of Kubernetes' own kinds:
// "default" and the repositories it and Package Operator read them from, which the schemas
// pkgsync embeds stand for.
var kubernetesSchemaLocations = []string{
	"default",
	"https://raw.githubusercontent.com/yannh/kubernetes-json-schema/",
	"https://github.com/yannh/kubernetes-json-schema",
	"https://raw.githubusercontent.com/instrumenta/kubernetes-json-schema/",
	"https://kubernetesjsonschema.dev",
}

// schemaLocationNote says what becomes of a kubeconform schema location offline.
func schemaLocationNote(loc string) string {
	for _, k := range kubernetesSchemaLocations {
		if loc == k || k != "default" && strings.HasPrefix(loc, k) {
			return "Kubernetes' own schemas: the ones pkgsync embeds are used instead, offline"
		}
	}
	if strings.HasPrefix(loc, "http://") || strings.HasPrefix(loc, "https://") {
		return "not used: pkgsync test fetches no schemas (it runs offline); custom resources are checked against the package's own " +
			"CustomResourceDefinitions, and the kinds without one are named as not checked"
	}
	return "not used: pkgsync checks custom resources against CustomResourceDefinitions, not kubeconform's JSON schema files; " +
		"ship the CustomResourceDefinitions in the package, or the kinds without one are named as not checked"
}
