package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/pmezard/go-difflib/difflib"
	"github.com/spf13/cobra"

	"pkgsync.dev/pkgsync/render"
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
configuration, environment) and compares the result with .test-fixtures/NAME.yaml next to the
manifest, as Package Operator's tooling does. A missing fixture is written; with --update every
fixture is rewritten. A test.kubeconform section is reported as skipped. Exits 1 when a case
fails to render or differs from its fixture.`,
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
			fsys := os.DirFS(dir)
			tests, err := render.ReadTemplateTests(fsys)
			if err != nil {
				return exitCodeError{code: 1, err: fmt.Errorf("test %s: %w", dir, err)}
			}
			stderr := cmd.ErrOrStderr()
			for _, s := range tests.Skipped {
				fmt.Fprintln(stderr, s)
			}
			if len(tests.Cases) == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: no test.template cases\n", dir)
				return nil
			}
			fixtures := filepath.Join(dir, tests.Dir, render.FixturesDir)
			failed := 0
			for _, tc := range tests.Cases {
				tc.Options.Component = component
				status, err := runTestCase(cmd, fsys, fixtures, tc, update)
				if err != nil {
					failed++
					fmt.Fprintf(stderr, "FAIL %s: %v\n", tc.Name, err)
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", status, tc.Name)
			}
			if failed > 0 {
				return exitCodeError{code: 1, err: fmt.Errorf("test %s: %d of %d case(s) failed", dir, failed, len(tests.Cases))}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&update, "update", false, "rewrite every fixture with the current render")
	cmd.Flags().StringVar(&component, "component", "", "component of a multi-component package to test (components/NAME)")
	return cmd
}

// runTestCase renders one case and checks it against its fixture; it says what it did: ok,
// written or updated.
func runTestCase(cmd *cobra.Command, fsys fs.FS, fixtures string, tc render.TestCase, update bool) (string, error) {
	res, err := render.Render(cmd.Context(), fsys, tc.Options)
	if err != nil {
		return "", err
	}
	var got bytes.Buffer
	if err := res.WriteYAML(&got); err != nil {
		return "", err
	}
	file := filepath.Join(fixtures, tc.Name+".yaml")
	want, err := os.ReadFile(file)
	switch {
	case errors.Is(err, fs.ErrNotExist) || update:
		if err := os.MkdirAll(fixtures, 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(file, got.Bytes(), 0o644); err != nil {
			return "", err
		}
		if update && err == nil {
			return "updated", nil
		}
		return "written", nil
	case err != nil:
		return "", err
	}
	if bytes.Equal(want, got.Bytes()) {
		return "ok", nil
	}
	diff, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(string(want)), B: difflib.SplitLines(got.String()),
		FromFile: file, ToFile: "render", Context: 3,
	})
	return "", fmt.Errorf("the render differs from %s (run with --update to accept it):\n%s", file, diff)
}
