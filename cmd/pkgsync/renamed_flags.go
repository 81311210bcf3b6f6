package main

import (
	"github.com/spf13/cobra"
)

// The CLI's output flags follow one rule, kubectl's: -o/--output names an output format (render,
// version, verify, fleet status, fleet plan; output_format.go). What a command writes to has a flag of its own: --archive FILE (build,
// image), --into DIR (pull). build, push, pull and image name their format --output-format,
// since their --output is still the deprecated spelling of a destination (renameFlag).

// renameFlag keeps oldName (with oldShorthand, when it had one), the spelling a flag had before,
// as a deprecated alias of the flag newName that cmd already defines: both set the same value,
// so scripts keep working, and the old spelling warns on stderr. The returned check, called
// first in RunE, refuses both spellings at once as a usage error.
func renameFlag(cmd *cobra.Command, newName, oldName, oldShorthand string) func() error {
	fs := cmd.Flags()
	current := fs.Lookup(newName)
	alias := fs.VarPF(current.Value, oldName, oldShorthand, current.Usage)
	// What MarkDeprecated sets, without its error for an unknown name: the alias was just
	// defined. The shorthand warns with the same line (pflag's MarkShorthandDeprecated would add
	// a second).
	alias.Deprecated = "use --" + newName + " (-o and --output name output formats)"
	alias.Hidden = true
	return func() error {
		if fs.Changed(newName) && fs.Changed(oldName) {
			return usageError("--%s is the old spelling of --%s: give one of them", oldName, newName)
		}
		return nil
	}
}

// warnOnStderr sends the flag parser's warnings (a deprecated spelling used) of c and its
// subcommands to the command's stderr. cobra prints them on the command's output, which is
// stdout once a caller sets one, where they would mix with the data a script reads.
func warnOnStderr(c *cobra.Command) {
	c.Flags().SetOutput(stderrOf{c})
	for _, sub := range c.Commands() {
		warnOnStderr(sub)
	}
}

// stderrOf writes to the command's stderr as it is when written to, after SetErr.
type stderrOf struct{ cmd *cobra.Command }

func (w stderrOf) Write(p []byte) (int, error) { return w.cmd.ErrOrStderr().Write(p) }
