package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// readDoc reads a file of the repository, from the root.
func readDoc(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", path))
	require.NoError(t, err)
	return string(data)
}

// tableAfter is the Markdown table that starts with the line header.
func tableAfter(t *testing.T, doc, header string) string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, header+"\n")
	require.True(t, ok, "table %q", header)
	end := strings.Index(rest, "\n\n")
	require.Positive(t, end)
	return rest[:end]
}

// leafCommands are the paths of the commands a user runs ("fleet plan", "key generate"), not
// cobra's own (help, completion) nor those that only group others.
func leafCommands(c *cobra.Command) []string {
	var out []string
	for _, sub := range c.Commands() {
		switch {
		case sub.Name() == "help" || sub.Name() == "completion":
		case sub.HasSubCommands():
			out = append(out, leafCommands(sub)...)
		default:
			out = append(out, strings.TrimPrefix(sub.CommandPath(), "pkgsync "))
		}
	}
	return out
}

// The README's command table lists every command, its controller flag table every flag of
// pkgsync controller, and docs/architecture.md names every command.
func TestREADMEListsEveryCommandAndFlag(t *testing.T) {
	t.Parallel()
	readme := readDoc(t, "README.md")
	commands := tableAfter(t, readme, "| Command | What it does |")
	architecture := readDoc(t, "docs/architecture.md")
	_, cliRow, ok := strings.Cut(architecture, "| [`cmd/pkgsync`](../cmd/pkgsync) |")
	require.True(t, ok)
	cliRow, _, _ = strings.Cut(cliRow, "\n")
	for _, path := range leafCommands(newRootCmd()) {
		assert.Contains(t, commands, "`pkgsync "+path, "README.md's command table")
		assert.Contains(t, cliRow, "`"+path+"`", "docs/architecture.md's cmd/pkgsync row")
	}

	flags := tableAfter(t, readme, "| Flag | Default | Meaning |")
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile("`--([a-z0-9-]+)`").FindAllStringSubmatch(flags, -1) {
		listed[m[1]] = true
	}
	newControllerCmd().Flags().VisitAll(func(f *pflag.Flag) {
		assert.True(t, listed[f.Name], "--%s of pkgsync controller is missing from README.md's flag table", f.Name)
	})
}

// Every kind of the CRDs install applies but TrustPolicy is reconciled by the controller and
// blocks uninstall; pkgsync --help, pkgsync uninstall --help and the docs say so.
func TestKindListsNameEveryKind(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("..", "..", "config", "crd", "bases", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	root := newRootCmd()
	controller, _, err := root.Find([]string{"controller"})
	require.NoError(t, err)
	uninstall, _, err := root.Find([]string{"uninstall"})
	require.NoError(t, err)
	readme, operations := readDoc(t, "README.md"), readDoc(t, "docs/operations.md")
	_, readmeUninstall, _ := strings.Cut(readme, "`pkgsync uninstall` removes")
	_, opsUninstall, _ := strings.Cut(operations, "`pkgsync uninstall` deletes")
	for _, file := range files {
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		var crd struct {
			Spec struct {
				Names struct{ Kind, Plural string }
			}
		}
		require.NoError(t, yaml.Unmarshal(data, &crd), file)
		kind := crd.Spec.Names.Kind
		require.NotEmpty(t, kind, file)
		if kind == v1alpha1.TrustPolicyKind {
			continue
		}
		plural := kind + "s"
		assert.Contains(t, controller.Short, plural, "pkgsync --help's controller line")
		assert.Contains(t, controller.Long, kind, "pkgsync controller --help")
		assert.Contains(t, uninstall.Long, plural, "pkgsync uninstall --help")
		assert.Contains(t, flatten(readmeUninstall[:min(400, len(readmeUninstall))]), plural, "README.md on uninstall")
		assert.Contains(t, flatten(opsUninstall[:min(400, len(opsUninstall))]), plural, "docs/operations.md on uninstall")
	}
}

// flatten joins a paragraph's lines.
func flatten(s string) string { return strings.Join(strings.Fields(s), " ") }
