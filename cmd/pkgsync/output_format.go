package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"
)

// Output formats: one vocabulary for -o/--output on every command that prints a result, as
// kubectl's printers (PrintFlags) and helm's output.Format: json and yaml print the result as a
// document, a command's default prints it for people (a table, or text where the result is
// not a list), and wide adds columns where there is a table.
const (
	outputJSON  = "json"
	outputYAML  = "yaml"
	outputTable = "table"
	outputWide  = "wide"
)

// outputFlag is -o/--output: the format and the formats the command prints.
type outputFlag struct {
	format  string
	formats []string
}

// addOutputFlag binds -o/--output to fs: def is the default (table or text), then json and yaml,
// then the others the command prints (wide).
func addOutputFlag(fs *pflag.FlagSet, def string, others ...string) *outputFlag {
	o := &outputFlag{formats: append([]string{def, outputJSON, outputYAML}, others...)}
	fs.StringVarP(&o.format, "output", "o", def, "Output format: "+o.list())
	return o
}

// list is "table, json, yaml or wide".
func (o *outputFlag) list() string {
	n := len(o.formats)
	return strings.Join(o.formats[:n-1], ", ") + " or " + o.formats[n-1]
}

// check refuses a format the command does not print, as a usage error.
func (o *outputFlag) check() error {
	if !slices.Contains(o.formats, o.format) {
		return usageError("--output must be %s, not %q", o.list(), o.format)
	}
	return nil
}

// document reports whether the result is printed as a JSON or YAML document.
func (o *outputFlag) document() bool {
	return o.format == outputJSON || o.format == outputYAML
}

// writeDocument prints v on cmd's stdout as the format says, json (indented) or yaml; what names
// the result in an error.
func (o *outputFlag) writeDocument(cmd *cobra.Command, what string, v any) error {
	if o.format == outputYAML {
		data, err := yaml.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode %s as YAML: %w", what, err)
		}
		_, err = yamlOutput(cmd).Write(data)
		return err
	}
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode %s as JSON: %w", what, err)
	}
	return nil
}
