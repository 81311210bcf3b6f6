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
		out.Cases = append(out.Cases, TestCase{Name: tc.Name, Options: opts, CheckObjects: m.Test.Kubeconform != nil})
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
	if problems := m.placed.check(nil).problems; len(problems) > 0 {
		return nil, problems
	}
	return res, nil
}

// kubeconformNotes says how a test.kubeconform section is run otherwise than Package Operator
// runs it: pkgsync checks objects against the schemas it is built with and the package's own
// CustomResourceDefinitions, offline, never against another release's or schemas downloaded.
func kubeconformNotes(kc *v1alpha1.PackageManifestTestKubeconform) []string {
	if kc == nil {
		return nil
	}
	var notes []string
	want := strings.TrimPrefix(kc.KubernetesVersion, "v")
	if have := schema.KubernetesVersion(); want != have && !strings.HasPrefix(want, have+".") {
		notes = append(notes, fmt.Sprintf("test.kubeconform.kubernetesVersion: objects are checked against Kubernetes %s's schemas (pkgsync's own), not %s's", have, kc.KubernetesVersion))
	}
	if len(kc.SchemaLocations) > 0 {
		notes = append(notes, "test.kubeconform.schemaLocations: not read: custom resources are checked against the package's own CustomResourceDefinitions, offline")
	}
	return notes
}
