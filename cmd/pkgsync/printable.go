package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// The CLI prints text the operator did not write: a template's fail message, a registry's
// error, a condition message from the cluster, a file name in a package. A terminal acts on some
// characters rather than showing them (ESC starts sequences that set the window title, move
// the cursor, erase lines; BEL, CR, the C1 controls), and the Unicode formatting characters
// (bidirectional overrides, isolates and marks, zero-width characters) make text read in an
// order or a form it does not have. Everything pkgsync writes on stdout and stderr therefore
// goes through one filter, printableText, installed on the root command's writers
// (guardOutput) and on main's error path; what pkgsync composes with control sequences of its
// own (the progress line, the fleet watch frame) passes the text it shows through the filter
// first and writes to the terminal under it (terminalOf).

// unprintable reports whether the CLI escapes r rather than writing it: every rune that is not
// graphic (letters, marks, numbers, punctuation, symbols, spaces) except newline and tab: the
// C0 controls with CR and ESC, DEL, the C1 controls, formatting characters (U+200B–U+200F,
// U+202A–U+202E, U+2060–U+206F, U+061C, U+FEFF...), line and paragraph separators, private-use,
// surrogate and unassigned code points.
func unprintable(r rune) bool {
	return r != '\n' && r != '\t' && !unicode.IsGraphic(r)
}

// printableText returns s with every unprintable rune escaped as JSON spells it (\u001b; past
// U+FFFF a surrogate pair, \udb40\udc67) and invalid UTF-8 as U+FFFD. Newlines and tabs are
// kept: errors, problem lists and diffs have lines. JSON's spelling keeps JSON output valid
// and its values unchanged: encoding/json writes such runes raw only inside strings, where the
// escape means the same rune.
func printableText(s string) string {
	return escapeUnprintable(s, false)
}

// printable makes text from others safe for one table cell or one line on a terminal:
// printableText, with line breaks and tabs turned into spaces so that the table holds.
func printable(s string) string {
	return escapeUnprintable(s, true)
}

func escapeUnprintable(s string, oneLine bool) string {
	clean := utf8.ValidString(s)
	for _, r := range s {
		if !clean || unprintable(r) || oneLine && (r == '\n' || r == '\t') {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for _, r := range s { // an invalid byte reads as utf8.RuneError, which is graphic
		switch {
		case oneLine && (r == '\n' || r == '\t'):
			b.WriteByte(' ')
		case unprintable(r):
			if r > 0xffff {
				hi, lo := utf16.EncodeRune(r)
				fmt.Fprintf(&b, `\u%04x\u%04x`, hi, lo)
				continue
			}
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// printableWriter passes everything written to it through printableText. A rune split across
// two writes is held until its end arrives, so that it is not taken for invalid UTF-8.
type printableWriter struct {
	mu      sync.Mutex
	w       io.Writer
	pending []byte
}

func newPrintableWriter(w io.Writer) *printableWriter {
	return &printableWriter{w: w}
}

func (p *printableWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	data := b
	if len(p.pending) > 0 {
		data = append(p.pending, b...)
		p.pending = nil
	}
	cut := len(data)
	for i := len(data) - 1; i >= 0 && i > len(data)-utf8.UTFMax; i-- {
		if utf8.RuneStart(data[i]) {
			if !utf8.FullRune(data[i:]) {
				cut = i
			}
			break
		}
	}
	p.pending = append(p.pending, data[cut:]...)
	if _, err := io.WriteString(p.w, printableText(string(data[:cut]))); err != nil {
		return 0, err
	}
	return len(b), nil
}

// guardOutput puts the filter on root's stdout and stderr, whatever they were set to (tests set
// buffers), once. It runs before every command, so every command writes through it.
func guardOutput(root *cobra.Command) {
	if _, ok := root.OutOrStdout().(*printableWriter); !ok {
		root.SetOut(newPrintableWriter(root.OutOrStdout()))
	}
	if _, ok := root.ErrOrStderr().(*printableWriter); !ok {
		root.SetErr(newPrintableWriter(root.ErrOrStderr()))
	}
}

// terminalOf returns the terminal w writes to, through the filter or not, for output that
// pkgsync composes with control sequences of its own; the text it shows there must have gone
// through printableText first.
func terminalOf(w io.Writer) (*os.File, bool) {
	if p, ok := w.(*printableWriter); ok {
		w = p.w
	}
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) { //nolint:gosec // a file descriptor fits an int
		return nil, false
	}
	return f, true
}

// yamlOutput is where a command writes YAML data (render -o yaml, fleet status -o yaml, convert,
// install --export): through the filter on a terminal, as written elsewhere. A pipe or a file
// gets the bytes a YAML parser needs: the encoder already escapes every control character
// (sigs.k8s.io/yaml double-quotes such a string and spells the character \e, \a, \r...; DEL and
// C1 are refused), so only formatting characters, which are data there (an emoji's zero-width
// joiner, a right-to-left mark in a translation), can be raw in it; the filter would change
// their values, since in a plain or block scalar \u202e is six characters.
func yamlOutput(cmd *cobra.Command) io.Writer {
	w := cmd.OutOrStdout()
	if _, ok := terminalOf(w); ok {
		return w
	}
	if p, ok := w.(*printableWriter); ok {
		return p.w
	}
	return w
}
