package main

import (
	"fmt"
	"io"

	"github.com/spf13/pflag"
)

// Dry-run modes: kubectl's (kubectl/pkg/cmd/util AddDryRunFlag, GetDryRunStrategy).
const (
	dryRunNone   = "none"
	dryRunClient = "client"
	dryRunServer = "server"
)

// dryRunFlag is --dry-run=none|client|server, one flag for every command that writes to a
// cluster (apply, install), with kubectl's meaning: none (the default) writes; client prints
// what would be sent without sending anything; server sends every object as a server-side dry
// run, which the API server checks (admission, schemas, conflicts) and does not persist.
//
// As in kubectl 1.36, a value is required. apply's --dry-run was a bool meaning a server-side
// dry run: for apply only (legacyBool), --dry-run alone and --dry-run=true still mean server
// and --dry-run=false none, with a deprecation warning on stderr (warnDeprecated); pflag needs
// a NoOptDefVal for the bare spelling, so apply's --dry-run does not take its value as the next
// argument ("--dry-run server"): spell it --dry-run=server, as kubectl requires.
type dryRunFlag struct {
	mode string
	// legacy is the deprecated bool spelling that set mode, "" when none was used.
	legacy     string
	legacyBool bool
}

// addDryRunFlag binds --dry-run to fs; legacyBool accepts apply's old bool spellings.
func addDryRunFlag(fs *pflag.FlagSet, legacyBool bool, usage string) *dryRunFlag {
	d := &dryRunFlag{mode: dryRunNone, legacyBool: legacyBool}
	f := fs.VarPF(d, "dry-run", "", `Must be "none", "client" or "server": `+usage)
	if legacyBool {
		f.NoOptDefVal = "true"
	}
	return d
}

func (d *dryRunFlag) String() string { return d.mode }

func (d *dryRunFlag) Type() string { return "string" }

func (d *dryRunFlag) Set(s string) error {
	switch s {
	case dryRunNone, dryRunClient, dryRunServer:
		d.mode, d.legacy = s, ""
		return nil
	case "true", "false":
		if d.legacyBool {
			d.mode, d.legacy = map[string]string{"true": dryRunServer, "false": dryRunNone}[s], s
			return nil
		}
		return fmt.Errorf(`--dry-run=%s is not a dry-run mode: use --dry-run=none, client or server`, s)
	}
	return fmt.Errorf(`must be "none", "client" or "server"`)
}

// warnDeprecated says on w which spelling replaces the deprecated bool one, when it was used.
func (d *dryRunFlag) warnDeprecated(w io.Writer) {
	if d.legacy != "" {
		fmt.Fprintf(w, "Flag --dry-run without a value, =true or =false has been deprecated, use --dry-run=%s\n", d.mode)
	}
}

// enabled reports whether nothing is to be written: a client or a server dry run.
func (d *dryRunFlag) enabled() bool { return d.mode != dryRunNone }
