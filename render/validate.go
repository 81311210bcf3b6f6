package render

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
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

// ValidatePackage checks a package as Package Operator's "kubectl package validate" checks a
// directory: the package itself (with the configuration given; without one as a build, its
// constraints checked against opts.Environment), then
// every test.template case rendered with its own context as RenderTestCase renders it, the
// root's and, in a multi-component package, every component's (only opts.Component's when it is
// set). A package whose schema requires values its test cases give is valid, and a component
// whose templates only its cases render is checked. Fixtures are not compared (pkgsync test
// does that). Every problem is returned at once in Errors, a case's under its name ("test case
// backend/one: ..."), none twice: a problem the package check or an earlier case found is left
// out of a later case's.
func ValidatePackage(ctx context.Context, fsys fs.FS, opts Options, cfg ValidateConfig) error {
	var err error
	if cfg == WithConfig {
		_, err = Render(ctx, fsys, opts)
	} else {
		_, err = renderWith(ctx, fsys, opts, mode{allowMissing: true})
	}
	var problems Errors
	if err != nil && !errors.As(err, &problems) {
		return err
	}
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
			_, err := RenderTestCase(ctx, fsys, tc)
			var caseProblems Errors
			if err != nil && !errors.As(err, &caseProblems) {
				return fmt.Errorf("test case %s: %w", name, err)
			}
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
		return problems
	}
	return nil
}
