package render

import (
	"fmt"
	"strings"
)

// Error is one problem in a package: where it is and what is wrong.
type Error struct {
	// File is the package-relative path of the file, empty when the problem is not in a file.
	File string
	// Document is the 1-based index of the YAML document in File, 0 when not known.
	Document int
	// Line is the 1-based line in File, 0 when not known.
	Line int
	// Field is the path of the offending field, for example metadata.annotations.
	Field string
	// Err says what is wrong.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Document > 0 {
		fmt.Fprintf(&b, " (document %d)", e.Document)
	}
	if e.Field != "" {
		if b.Len() > 0 {
			b.WriteString(": ")
		}
		b.WriteString(e.Field)
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// ConfigError is a configuration that does not satisfy the package's schema. A controller
// reports it as invalid configuration rather than a broken package.
type ConfigError struct {
	// Field is the path of the offending configuration field, for example config.replicas.
	Field string
	// Detail says what is wrong.
	Detail string

	// missing is set when the schema requires the field and the configuration lacks it:
	// ValidateStructure lets that pass, since a build has no configuration to give.
	missing bool
}

func (e *ConfigError) Error() string {
	if e.Field == "" {
		return "invalid configuration: " + e.Detail
	}
	return "invalid configuration: " + e.Field + ": " + e.Detail
}

// Errors is every problem found in one render, in the order they were found.
type Errors []error

func (e Errors) Error() string {
	if len(e) == 1 {
		return e[0].Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d problems:", len(e))
	for _, err := range e {
		b.WriteString("\n  ")
		b.WriteString(err.Error())
	}
	return b.String()
}

func (e Errors) Unwrap() []error { return e }
