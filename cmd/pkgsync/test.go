package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"github.com/spf13/cobra"

	"pkgsync.dev/pkgsync/render"
	"pkgsync.dev/pkgsync/render/schema"
	"pkgsync.dev/pkgsync/source"
)

func newTestCmd() *cobra.Command {
	var (
		update    bool
		component string
	)
	cmd := &cobra.Command{
		Use:   "test DIR",
		Short: "Render a package's test.template cases and compare them with its .test-fixtures",
		Long: `Test renders every case of the manifest's test.template (its context: package metadata,
configuration, environment) and compares each YAML file of the package, as rendered, with
.test-fixtures/CASE/PATH next to the manifest (a template's PATH is its name without .gotmpl),
as Package Operator's "kubectl package validate" lays fixtures out and compares them. Images render
as ` + render.TestImage + `, as there.

A case without a fixture directory is written; an existing one is compared and never touched:
a file that differs fails the case with a unified diff, as does a rendered file the fixtures lack
or a fixture file the render no longer produces. --update rewrites the fixtures of every case.
In a multi-component package every component's cases run too (fixtures in
components/NAME/.test-fixtures); --component runs one component's only. With a
test.kubeconform section every case's objects are also checked as "pkgsync validate" checks
them, offline: against the schemas pkgsync embeds (those of the Kubernetes release it is built
with, ` + schema.KubernetesVersion() + `) with the rules of kubernetesVersion's release that pkgsync knows, and
the package's own CRDs. Stderr says which release was checked (another release's schemas are not
available offline), each schemaLocation that cannot be used offline, and per case the kinds
there was no schema for; a key of a case's configuration the schema does not declare is dropped
with a warning naming the case. Exits 1 when a case fails.

The cases are read from the manifest's test section, which pkgsync's own format
(pkgsync.dev/v1alpha1) and Package Operator's (manifests.package-operator.run/v1alpha1) share,
with the same meaning; only Package Operator's format needs a lock file for spec.images. A
package without cases says so. "pkgsync validate" renders every case too, without fixtures.`,
		Example: `  pkgsync test ./my-package
  pkgsync test ./my-package --update`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError("test takes a package directory, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			fsys, err := readPackageDir(dir)
			if err != nil {
				return exitCodeError{code: 1, err: err}
			}
			// Fixtures are read, written and removed through root, never through a path
			// string: nothing the package holds can point them outside the directory.
			root, err := os.OpenRoot(dir)
			if err != nil {
				return exitCodeError{code: 1, err: fmt.Errorf("test %s: %w", dir, err)}
			}
			defer root.Close()
			var all []*render.TemplateTests
			if component != "" {
				tests, err := render.ReadComponentTemplateTests(fsys, component)
				if err != nil {
					return exitCodeError{code: 1, err: fmt.Errorf("test %s: %w", dir, err)}
				}
				all = append(all, tests)
			} else {
				if all, err = render.ReadAllTemplateTests(fsys); err != nil {
					return exitCodeError{code: 1, err: fmt.Errorf("test %s: %w", dir, err)}
				}
			}
			stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
			failed, total := 0, 0
			for _, tests := range all {
				for _, s := range tests.Notes {
					fmt.Fprintln(stderr, prefixed(tests.Component, s))
				}
				for _, tc := range tests.Cases {
					total++
					name := prefixed(tests.Component, tc.Name)
					fixtures := path.Join(tests.Dir, render.FixturesDir, tc.Name)
					printWarnings(stderr, name, render.ConfigWarnings(fsys, tc.Options))
					status, notChecked, err := runTestCase(cmd, fsys, root, fixtures, tc, update)
					if len(notChecked) > 0 {
						fmt.Fprintf(stderr, "%s: %s\n", name, notCheckedNote(notChecked, "in the package; test.kubeconform.schemaLocations are not read offline"))
					}
					if err != nil {
						failed++
						fmt.Fprintf(stderr, "FAIL %s: %v\n", name, err)
						continue
					}
					fmt.Fprintf(stdout, "%s %s\n", status, name)
				}
			}
			if total == 0 {
				fmt.Fprintf(stdout, "%s: no test.template cases\n", dir)
				return nil
			}
			if failed > 0 {
				return exitCodeError{code: 1, err: fmt.Errorf("test %s: %d of %d case(s) failed", dir, failed, total)}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&update, "update", false, "rewrite the fixtures of every case with the current render")
	cmd.Flags().StringVar(&component, "component", "", "test only this component of a multi-component package (components/NAME)")
	return cmd
}

// prefixed names what belongs to a component by the component: "backend/defaults".
func prefixed(component, s string) string {
	if component == "" {
		return s
	}
	return component + "/" + s
}

// runTestCase renders one case and checks it against its fixture directory, fixtures (a path
// within root); it says what it did (ok, written or updated), and the kinds of the case's
// objects there was no schema for, when they were checked.
func runTestCase(cmd *cobra.Command, fsys fs.FS, root *os.Root, fixtures string, tc render.TestCase, update bool) (string, []string, error) {
	res, err := render.RenderTestCase(cmd.Context(), fsys, tc)
	if err != nil {
		return "", nil, err
	}
	exists, err := fixtureDirExists(root, fixtures)
	switch {
	case err != nil:
		return "", res.NotChecked, err
	case update && exists:
		// Files the render no longer produces go too: the directory is the render.
		if err := root.RemoveAll(fixtures); err != nil {
			return "", res.NotChecked, err
		}
		return "updated", res.NotChecked, writeFixtures(root, fixtures, res.Files)
	case !exists:
		return "written", res.NotChecked, writeFixtures(root, fixtures, res.Files)
	}
	return "ok", res.NotChecked, compareFixtures(root, fixtures, res.Files)
}

// fixtureDirExists tells whether the fixture directory fixtures exists in root. Every directory
// on the way is checked as a package directory's entries are (source.LoadDir): a symbolic link
// there is refused with the message build gives. os.Root would already keep a link from leading
// outside; refusing it also keeps --update from removing a directory of the package that a link
// inside it names.
func fixtureDirExists(root *os.Root, fixtures string) (bool, error) {
	parts := strings.Split(fixtures, "/")
	for i := range parts {
		p := path.Join(parts[:i+1]...)
		info, err := root.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if !info.IsDir() {
			return false, &source.NotRegularError{Path: p, Mode: info.Mode().Type()}
		}
	}
	return true, nil
}

func writeFixtures(root *os.Root, dir string, files []render.File) error {
	if err := root.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		p := path.Join(dir, f.Path)
		if err := root.MkdirAll(path.Dir(p), 0o755); err != nil {
			return err
		}
		if err := root.WriteFile(p, []byte(f.Content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// compareFixtures compares the rendered files with the fixture directory dir (within root),
// reading it only, as a package directory is read (source.LoadFS: regular files only, bounded),
// and reports every difference: one unified diff per differing file, and each file only one side
// has.
func compareFixtures(root *os.Root, dir string, files []render.File) error {
	fixtureRoot, err := root.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer fixtureRoot.Close()
	fixtures, err := source.LoadFS(fixtureRoot.FS(), source.Limits{})
	if err != nil {
		return fmt.Errorf("read fixtures %s: %w", dir, err)
	}
	var have []string
	err = fs.WalkDir(fixtures, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		have = append(have, p)
		return nil
	})
	if err != nil {
		return err
	}
	var problems []string
	rendered := map[string]bool{}
	for _, f := range files {
		rendered[f.Path] = true
		want, err := fs.ReadFile(fixtures, f.Path)
		if errors.Is(err, fs.ErrNotExist) {
			problems = append(problems, fmt.Sprintf("%s: rendered, but not in the fixtures", f.Path))
			continue
		}
		if err != nil {
			return err
		}
		if string(want) == f.Content {
			continue
		}
		diff, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
			A: difflib.SplitLines(string(want)), B: difflib.SplitLines(f.Content),
			FromFile: path.Join("FIXTURE", f.Path), ToFile: path.Join("ACTUAL", f.Path), Context: 3,
		})
		if err != nil {
			return err
		}
		problems = append(problems, fmt.Sprintf("%s: differs from its fixture:\n%s", f.Path, strings.TrimRight(diff, "\n")))
	}
	slices.Sort(have)
	for _, p := range have {
		if !rendered[p] {
			problems = append(problems, fmt.Sprintf("%s: in the fixtures, but the render has no objects there", p))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("the render differs from %s (run with --update to accept it):\n%s", filepath.Join(root.Name(), filepath.FromSlash(dir)), strings.Join(problems, "\n"))
	}
	return nil
}
