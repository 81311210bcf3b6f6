package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"pkgsync.dev/pkgsync/render"
)

// validateOutput is how validate reports: -o text|json|yaml and --strict. kubectl's field
// validation is the model (--validate=strict|warn|ignore): warnings by default, failures with
// --strict. There is no --validate=ignore: on a command named validate it would read twice, and
// -o json gives the warnings apart for a script that wants to ignore them.
type validateOutput struct {
	output string
	strict bool
}

func (o *validateOutput) ApplyFlags(fs *pflag.FlagSet) {
	fs.StringVarP(&o.output, "output", "o", "text", "Output format: text (problems and warnings on stderr), json or yaml (the result on stdout)")
	fs.BoolVar(&o.strict, "strict", false, "Fail on warnings too (a configuration key the schema does not declare), as kubectl's --validate=strict")
}

func (o *validateOutput) check() error {
	switch o.output {
	case "text", "json", "yaml":
		return nil
	}
	return usageError("--output must be text, json or yaml, not %q", o.output)
}

// validateResult is validate's result as -o json and -o yaml print it. Scripts depend on it.
type validateResult struct {
	// Package is the directory or reference validated, as given.
	Package string `json:"package"`
	Valid   bool   `json:"valid"`
	// Problems make the package or its configuration invalid; with --strict, warnings too.
	Problems []validateProblem `json:"problems"`
	Warnings []render.Warning  `json:"warnings"`
}

// validateProblem is one problem: where, when known, and the line the text output prints.
type validateProblem struct {
	File     string `json:"file,omitempty"`
	Document int    `json:"document,omitempty"`
	Line     int    `json:"line,omitempty"`
	Field    string `json:"field,omitempty"`
	Message  string `json:"message"`
}

// newValidateResult is the result of validating pkg: its problems and warnings, the warnings
// among the problems with --strict.
func (o *validateOutput) newValidateResult(pkg string, problems render.Errors, warnings []render.Warning) *validateResult {
	res := &validateResult{Package: pkg, Problems: []validateProblem{}, Warnings: []render.Warning{}}
	for _, p := range problems {
		vp := validateProblem{Message: p.Error()}
		var pe *render.Error
		var ce *render.ConfigError
		switch {
		case errors.As(p, &pe):
			vp.File, vp.Document, vp.Line, vp.Field = pe.File, pe.Document, pe.Line, pe.Field
		case errors.As(p, &ce):
			vp.Field = ce.Field
		}
		res.Problems = append(res.Problems, vp)
	}
	for _, w := range warnings {
		if o.strict {
			res.Problems = append(res.Problems, validateProblem{Field: w.Field, Message: w.Message})
			continue
		}
		res.Warnings = append(res.Warnings, w)
	}
	res.Valid = len(res.Problems) == 0
	return res
}

// print writes res: as text, the warnings and problems on stderr and "valid" on stdout; as
// json or yaml, the result on stdout. An invalid result is an exit code 1 error.
func (o *validateOutput) print(cmd *cobra.Command, res *validateResult, hint string) error {
	switch o.output {
	case "json":
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return fmt.Errorf("encode the result: %w", err)
		}
	case "yaml":
		data, err := yaml.Marshal(res)
		if err != nil {
			return fmt.Errorf("encode the result: %w", err)
		}
		if _, err := yamlOutput(cmd).Write(data); err != nil {
			return err
		}
	default:
		printWarnings(cmd.ErrOrStderr(), "", res.Warnings)
		for _, p := range res.Problems {
			fmt.Fprintln(cmd.ErrOrStderr(), p.Message)
		}
		if !res.Valid && hint != "" {
			fmt.Fprintln(cmd.ErrOrStderr(), hint)
		}
		if res.Valid {
			fmt.Fprintf(cmd.OutOrStdout(), "%s: valid\n", res.Package)
		}
	}
	if !res.Valid {
		return exitCodeError{code: 1, err: fmt.Errorf("%s: %d problem(s) found", res.Package, len(res.Problems))}
	}
	return nil
}
