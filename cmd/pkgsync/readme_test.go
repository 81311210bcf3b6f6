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

// The shell blocks of packages-example/*/README.md run as shown: files written with
// cat > FILE <<'EOF' go to a directory of the test's own, and each pkgsync command exits 0. Of
// README.md's, those that need neither a cluster nor a registry run (validate, render).
func TestExampleREADMECommands(t *testing.T) {
	t.Parallel()
	readmes, err := filepath.Glob(filepath.Join("..", "..", "packages-example", "*", "README.md"))
	require.NoError(t, err)
	require.NotEmpty(t, readmes)
	offline := map[string]bool{"validate": true, "render": true}
	ran := 0
	for _, readme := range append(readmes, filepath.Join("..", "..", "README.md")) {
		data, err := os.ReadFile(readme)
		require.NoError(t, err)
		only := map[string]bool(nil)
		if filepath.Base(filepath.Dir(readme)) == ".." {
			only = offline
		}
		dir := t.TempDir()
		for _, block := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(string(data), -1) {
			ran += runShellBlock(t, readme, dir, block[1], only)
		}
	}
	assert.GreaterOrEqual(t, ran, 4, "commands in the READMEs")
}

// runShellBlock runs the pkgsync commands (those of only, when given) and heredocs of one shell
// block in dir; it returns how many commands ran.
func runShellBlock(t *testing.T, readme, dir, block string, only map[string]bool) int {
	t.Helper()
	ran := 0
	heredoc := regexp.MustCompile(`^cat > (\S+) <<'EOF'$`)
	lines := strings.Split(block, "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if m := heredoc.FindStringSubmatch(line); m != nil {
			end := i + 1
			for end < len(lines) && lines[end] != "EOF" {
				end++
			}
			require.Less(t, end, len(lines), "%s: heredoc %s ends", readme, m[1])
			body := strings.Join(lines[i+1:end], "\n") + "\n"
			require.NoError(t, os.WriteFile(filepath.Join(dir, m[1]), []byte(body), 0o600))
			i = end
			continue
		}
		line, _, _ = strings.Cut(line, "#")
		args := strings.Fields(line)
		if len(args) < 2 || args[0] != "pkgsync" && args[0] != "bin/pkgsync" || only != nil && !only[args[1]] {
			continue
		}
		for j, a := range args {
			switch {
			case strings.HasPrefix(a, "packages-example/"):
				args[j] = filepath.Join("..", "..", a)
			case j > 0 && args[j-1] == "--config":
				args[j] = filepath.Join(dir, a)
			}
		}
		_, stderr, err := runCLI(t, args[1:]...)
		assert.NoError(t, err, "%s: %s\n%s", readme, line, stderr)
		ran++
	}
	return ran
}
