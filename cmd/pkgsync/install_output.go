package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"pkgsync.dev/pkgsync/apply"
)

// The results of install and uninstall as -o json and -o yaml print them: one document once the
// command ends (also when it fails part way: what was done is the result, the error goes to
// stderr). Without -o, the same results are printed a line each as they happen. Scripts depend
// on the documents.

// installReport is install's result.
type installReport struct {
	// Version is the release of pkgsync installed, Image the controller image (pinned to the
	// verified digest with --verify-key or --verify-identity).
	Version   string `json:"version"`
	Image     string `json:"image"`
	Namespace string `json:"namespace"`
	// DryRun is server or client, empty when the objects were applied.
	DryRun string `json:"dryRun,omitempty"`
	// Objects lists every object in the order applied (the CustomResourceDefinitions first), with
	// what happened to it; a client dry run's in install order, without an action: it asks no API
	// server.
	Objects []objectResult `json:"objects"`
}

// uninstallReport is uninstall's result.
type uninstallReport struct {
	Namespace string `json:"namespace"`
	// Objects lists every object uninstall deletes, in deletion order: deleted, or not found.
	Objects []objectResult `json:"objects"`
	// Released lists the pkgsync resources --force released, with the objects they applied,
	// which stay in the clusters.
	Released []releasedResource `json:"released"`
}

// objectResult is what install or uninstall did to one object.
type objectResult struct {
	Object string `json:"object"`
	// Action is created, configured or unchanged (install), deleted or not found (uninstall).
	Action string `json:"action,omitempty"`
	// Note says what the API server could not check (a dry run).
	Note string `json:"note,omitempty"`
}

// releasedResource is a pkgsync resource uninstall --force released.
type releasedResource struct {
	Object string `json:"object"`
	// Stay lists the objects its status says it applied.
	Stay []appliedObject `json:"stay"`
	// Problem says why its status.inventory could not be read.
	Problem string `json:"problem,omitempty"`
}

// appliedObject is an object a pkgsync resource applied, and where.
type appliedObject struct {
	Cluster string `json:"cluster"`
	Object  string `json:"object"`
	Phase   string `json:"phase"`
}

func (a appliedObject) String() string {
	return fmt.Sprintf("%s: %s (phase %s)", a.Cluster, a.Object, a.Phase)
}

// writeResult prints a command's result as the document -o asks for, after the command ran;
// err is how it ended, returned unless printing fails where the command did not.
func writeResult(cmd *cobra.Command, output *outputFlag, what string, v any, err error) error {
	if werr := output.writeDocument(cmd, what, v); werr != nil && err == nil {
		return werr
	}
	return err
}

// record notes what happened to one object and, unless the result is printed as a document at
// the end, prints it as a line: "REF ACTION", marked "(dry run)" in a dry run when the object
// would change, with the note after it.
func (i *installer) record(ref apply.ObjectRef, action, note string) {
	i.results = append(i.results, objectResult{Object: ref.String(), Action: action, Note: note})
	if i.document {
		return
	}
	var marks []string
	if i.dryRun && action != actionUnchanged {
		marks = append(marks, "dry run")
	}
	if note != "" {
		marks = append(marks, note)
	}
	line := ref.String() + " " + action
	if len(marks) > 0 {
		line += " (" + strings.Join(marks, "; ") + ")"
	}
	fmt.Fprintln(i.stdout, line)
}

// recordReleased notes a released resource and, unless the result is a document, prints it with
// the objects that stay.
func (i *installer) recordReleased(r releasedResource) {
	i.released = append(i.released, r)
	if i.document {
		return
	}
	switch {
	case r.Problem != "":
		fmt.Fprintf(i.stdout, "%s released; these objects it applied stay:\n  (%s)\n", r.Object, r.Problem)
	case len(r.Stay) == 0:
		fmt.Fprintf(i.stdout, "%s released; it had applied nothing\n", r.Object)
	default:
		fmt.Fprintf(i.stdout, "%s released; these objects it applied stay:\n", r.Object)
		for _, s := range r.Stay {
			fmt.Fprintf(i.stdout, "  %s\n", s)
		}
	}
}

// Actions of install and uninstall.
const (
	actionCreated    = "created"
	actionConfigured = "configured"
	actionUnchanged  = "unchanged"
	actionDeleted    = "deleted"
	actionNotFound   = "not found"
)
