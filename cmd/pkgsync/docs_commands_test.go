package main

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// docCommand is a pkgsync command line a document shows in a code block.
type docCommand struct {
	where string // file:line
	args  []string
}

// TestDocsShowOnlyCommandsAndFlagsThatExist (issue 45): every pkgsync command line in a code
// block of the README, docs/ and the examples' READMEs names a command that exists and flags
// it takes, parsed by the CLI's own flag sets (commands that need a cluster or a registry are
// parsed, not run; TestExampleREADMECommands runs those that need neither).
func TestDocsShowOnlyCommandsAndFlagsThatExist(t *testing.T) {
	t.Parallel()
	files := []string{filepath.Join("..", "..", "README.md")}
	for _, glob := range []string{"docs/*.md", "packages-example/*/README.md"} {
		matches, err := filepath.Glob(filepath.Join("..", "..", glob))
		require.NoError(t, err)
		files = append(files, matches...)
	}
	var commands []docCommand
	for _, f := range files {
		commands = append(commands, docCommands(t, f)...)
	}
	require.GreaterOrEqual(t, len(commands), 30, "pkgsync command lines in the docs")
	for _, c := range commands {
		root := newRootCmd()
		cmd, rest, err := root.Find(c.args)
		if !assert.NoError(t, err, "%s: pkgsync %s", c.where, strings.Join(c.args, " ")) {
			continue
		}
		if !assert.NotEqual(t, root, cmd, "%s: pkgsync %s names no command", c.where, strings.Join(c.args, " ")) {
			continue
		}
		assert.NoError(t, cmd.ParseFlags(rest), "%s: pkgsync %s", c.where, strings.Join(c.args, " "))
	}
}

// placeholder matches what a document writes for arguments left to the reader: [--flag ...],
// an ellipsis.
var placeholder = regexp.MustCompile(`\[[^\]]*\]|\.\.\.|…`)

// docCommands returns the pkgsync command lines of the fenced code blocks of a Markdown file:
// continued lines joined, a leading "$ " prompt, comments and placeholders dropped, each
// command of a pipeline or list on its own.
func docCommands(t *testing.T, path string) []docCommand {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	var (
		out            []docCommand
		inBlock        bool
		pending        string
		pendingLine, n int
	)
	name := strings.TrimPrefix(path, filepath.Join("..", "..")+string(filepath.Separator))
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inBlock, pending = !inBlock, ""
			continue
		}
		if !inBlock {
			continue
		}
		if pending == "" {
			pendingLine = n
		}
		if cont, ok := strings.CutSuffix(strings.TrimRight(line, " "), `\`); ok {
			pending += cont + " "
			continue
		}
		full := pending + line
		pending = ""
		for _, args := range commandsOf(full) {
			out = append(out, docCommand{where: name + ":" + strconv.Itoa(pendingLine), args: args})
		}
	}
	require.NoError(t, sc.Err())
	return out
}

// commandsOf splits a shell line into its pkgsync commands' arguments.
func commandsOf(line string) [][]string {
	line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "$ "))
	var out [][]string
	for _, segment := range regexp.MustCompile(`\|\||&&|[|;]`).Split(line, -1) {
		words := shellWords(placeholder.ReplaceAllString(segment, ""))
		if len(words) < 2 || words[0] != "pkgsync" {
			continue
		}
		args := words[1:]
		for i, w := range args {
			if strings.HasPrefix(w, ">") || strings.HasPrefix(w, "<") || strings.HasPrefix(w, "2>") {
				args = args[:i]
				break
			}
		}
		out = append(out, args)
	}
	return out
}

// shellWords splits s as a POSIX shell splits words, quotes removed, up to a comment.
func shellWords(s string) []string {
	var (
		words []string
		cur   strings.Builder
		quote rune
		in    bool
	)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == '#' && !in:
			return words
		case r == ' ' || r == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}
