package render

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"pkgsync.dev/pkgsync/render/schema"
)

// ValidateConfig says what a validation knows of the configuration a package will get.
type ValidateConfig int

const (
	// WithoutConfig: none was given. The package is checked as a build checks it
	// (ValidateStructure: values its schema requires may be absent), and its constraints
	// against Options.Environment.
	WithoutConfig ValidateConfig = iota
	// WithConfig: Options.Config is the configuration, checked as Render checks it.
	WithConfig
)

// Validation is what ValidatePackage checked of the rendered objects.
type Validation struct {
	// NotChecked names the kinds ("example.com/v1 Widget") of the rendered objects that had no
	// schema to be checked against: neither built into Kubernetes nor defined by a
	// CustomResourceDefinition of the package or of the crds given. Sorted, each once.
	NotChecked []string
}

// ValidatePackage checks a package as Package Operator's "kubectl package validate" checks a
// directory: the package itself (with the configuration given; without one as a build, its
// constraints checked against opts.Environment), then
// every test.template case rendered with its own context as RenderTestCase renders it, the
// root's and, in a multi-component package, every component's (only opts.Component's when it is
// set). A package whose schema requires values its test cases give is valid, and a component
// whose templates only its cases render is checked. Fixtures are not compared (pkgsync test
// does that).
//
// Every object rendered is checked as the API server would check it (package schema): built-in
// kinds against Kubernetes' own schemas, custom resources against the CustomResourceDefinitions
// of the package and crds; the kinds of neither are named in the Validation, which is returned
// with or without problems. Every problem is returned at once in Errors, a case's under its name
// ("test case backend/one: ..."), none twice: a problem the package check or an earlier case
// found is left out of a later case's.
func ValidatePackage(ctx context.Context, fsys fs.FS, opts Options, cfg ValidateConfig, crds ...*unstructured.Unstructured) (*Validation, error) {
	m := mode{allowMissing: cfg != WithConfig, placed: &placedObjects{}}
	_, err := renderWith(ctx, fsys, opts, m)
	var problems Errors
	if err != nil && !errors.As(err, &problems) {
		return nil, err
	}
	v := &Validation{}
	problems = append(problems, v.add(m.placed.check(crds, schema.Release{}))...)
	seen := map[string]bool{}
	for _, p := range problems {
		seen[p.Error()] = true
	}

	var all []*TemplateTests
	if opts.Component != "" {
		tests, err := ReadComponentTemplateTests(fsys, opts.Component)
		if err == nil {
			all = append(all, tests)
		}
	} else {
		all, _ = ReadAllTemplateTests(fsys)
	}
	// A test section that cannot be read is a broken manifest, which the package check reported.
	for _, tests := range all {
		for _, tc := range tests.Cases {
			name := tc.Name
			if tests.Component != "" {
				name = tests.Component + "/" + name
			}
			placed := &placedObjects{}
			_, err := renderWith(ctx, fsys, tc.Options, mode{testCase: true, placed: placed})
			var caseProblems Errors
			if err != nil && !errors.As(err, &caseProblems) {
				return nil, fmt.Errorf("test case %s: %w", name, err)
			}
			caseProblems = append(caseProblems, v.add(placed.check(crds, tc.release()))...)
			for _, p := range caseProblems {
				if seen[p.Error()] {
					continue
				}
				seen[p.Error()] = true
				problems = append(problems, fmt.Errorf("test case %s: %w", name, p))
			}
		}
	}
	if len(problems) > 0 {
		return v, problems
	}
	return v, nil
}

// add counts what checks found and returns their problems.
func (v *Validation) add(c objectChecks) Errors {
	for _, kind := range c.notChecked {
		if !slices.Contains(v.NotChecked, kind) {
			v.NotChecked = append(v.NotChecked, kind)
		}
	}
	slices.Sort(v.NotChecked)
	return c.problems
}
