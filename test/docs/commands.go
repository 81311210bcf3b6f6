package docs

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Command is a pkgsync command line a document shows in a code block.
type Command struct {
	// Where is FILE:LINE, FILE relative to the repository.
	Where string
	// File is the document, relative to the repository (docs/fleet.md).
	File string
	// Lang is the code block's language as its fence names it: sh, console, "" ...
	Lang string
	// Env holds the VAR=VALUE words before the command (COSIGN_PASSWORD=...).
	Env []string
	// Args are the command's arguments, after pkgsync (or bin/pkgsync).
	Args []string
}

func (c Command) String() string { return strings.Join(append([]string{"pkgsync"}, c.Args...), " ") }

// Files lists the documents under root, the repository: README.md, docs/*.md and
// packages-example/*/README.md.
func Files(root string) ([]string, error) {
	files := []string{"README.md"}
	for _, glob := range []string{"docs/*.md", "packages-example/*/README.md"} {
		matches, err := filepath.Glob(filepath.Join(root, glob))
		if err != nil {
			return nil, err
		}
		for _, m := range matches {
			rel, err := filepath.Rel(root, m)
			if err != nil {
				return nil, err
			}
			files = append(files, filepath.ToSlash(rel))
		}
	}
	return files, nil
}

// All returns the pkgsync command lines of every document of Files, in document order.
func All(root string) ([]Command, error) {
	files, err := Files(root)
	if err != nil {
		return nil, err
	}
	var out []Command
	for _, f := range files {
		cmds, err := Read(root, f)
		if err != nil {
			return nil, err
		}
		out = append(out, cmds...)
	}
	return out, nil
}

// Read returns the pkgsync command lines of the fenced code blocks of the Markdown file (relative
// to root): continued lines joined, comments and placeholders ([--flag ...], an ellipsis) dropped,
// each command of a pipeline or list on its own. In a console block only the lines after a "$ "
// prompt are commands, the others being their output.
func Read(root, file string) ([]Command, error) {
	f, err := os.Open(filepath.Join(root, filepath.FromSlash(file)))
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var (
		out            []Command
		inBlock        bool
		lang, pending  string
		pendingLine, n int
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
		line := sc.Text()
		if fence, ok := strings.CutPrefix(strings.TrimSpace(line), "```"); ok {
			inBlock, pending = !inBlock, ""
			lang = strings.TrimSpace(fence)
			continue
		}
		if !inBlock {
			continue
		}
		if pending == "" {
			pendingLine = n
			if lang == "console" {
				var prompt bool
				if line, prompt = strings.CutPrefix(strings.TrimSpace(line), "$ "); !prompt {
					continue
				}
			}
		}
		if cont, ok := strings.CutSuffix(strings.TrimRight(line, " "), `\`); ok {
			pending += cont + " "
			continue
		}
		full := pending + line
		pending = ""
		for _, c := range commandsOf(full) {
			c.Where, c.File, c.Lang = file+":"+strconv.Itoa(pendingLine), file, lang
			out = append(out, c)
		}
	}
	return out, sc.Err()
}

// placeholder matches what a document writes for arguments left to the reader: [--flag ...],
// an ellipsis.
var placeholder = regexp.MustCompile(`\[[^\]]*\]|\.\.\.|…`)

var (
	separators = regexp.MustCompile(`\|\||&&|[|;]`)
	assignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
)

// commandsOf splits a shell line into its pkgsync commands.
func commandsOf(line string) []Command {
	line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "$ "))
	var out []Command
	for _, segment := range separators.Split(line, -1) {
		words := shellWords(placeholder.ReplaceAllString(segment, ""))
		var env []string
		for len(words) > 0 && assignment.MatchString(words[0]) {
			env, words = append(env, words[0]), words[1:]
		}
		if len(words) < 2 || words[0] != "pkgsync" && words[0] != "bin/pkgsync" {
			continue
		}
		args := words[1:]
		for i, w := range args {
			if strings.HasPrefix(w, ">") || strings.HasPrefix(w, "<") || strings.HasPrefix(w, "2>") {
				args = args[:i]
				break
			}
		}
		out = append(out, Command{Env: env, Args: args})
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
