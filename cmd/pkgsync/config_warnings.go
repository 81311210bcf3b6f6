package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"strings"

	fleets "pkgsync.dev/pkgsync/internal/fleet"
	"pkgsync.dev/pkgsync/render"
)

// printWarnings writes the warnings of a render (configuration keys the package's schema does
// not declare, dropped) on stderr as kubectl writes the API server's, "Warning: ...", after
// where when it is set: the test case or fleet members they are about. It is how every command
// that renders reports them (render, validate, apply, diff, test, fleet plan).
func printWarnings(stderr io.Writer, where string, warnings []render.Warning) {
	for _, w := range warnings {
		if where == "" {
			fmt.Fprintln(stderr, "Warning:", w)
		} else {
			fmt.Fprintf(stderr, "Warning: %s: %s\n", where, w)
		}
	}
}

// renderPackage renders a package as render.Render does and prints its warnings on stderr: the
// render's, or when it fails those of its configuration (render.ConfigWarnings), since a dropped
// key is often why a required one is missing. A command may run without a context in tests.
func renderPackage(ctx context.Context, stderr io.Writer, fsys fs.FS, opts render.Options) (*render.Result, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	res, err := render.Render(ctx, fsys, opts)
	if err != nil {
		printWarnings(stderr, "", render.ConfigWarnings(fsys, opts))
		return nil, err
	}
	printWarnings(stderr, "", res.Warnings)
	return res, nil
}

// maxListedMembers bounds the members a fleet plan's warning names.
const maxListedMembers = 5

// memberWarning is a warning of a fleet plan and the members whose render gave it.
type memberWarning struct {
	warning render.Warning
	members []string
}

// printMemberWarnings prints the warnings of a fleet's member renders, each once with the
// members it is about (a fleet's configuration is mostly the same for all of them).
func printMemberWarnings(stderr io.Writer, members []fleets.PreflightMember) {
	var all []*memberWarning
	byMessage := map[string]*memberWarning{}
	for _, m := range members {
		member := m.Namespace
		for _, w := range m.Warnings {
			mw, ok := byMessage[w.Message]
			if !ok {
				mw = &memberWarning{warning: w}
				byMessage[w.Message] = mw
				all = append(all, mw)
			}
			mw.members = append(mw.members, member)
		}
	}
	for _, mw := range all {
		names := mw.members
		more := ""
		if len(names) > maxListedMembers {
			names, more = names[:maxListedMembers], fmt.Sprintf(" and %d more", len(mw.members)-maxListedMembers)
		}
		noun := "member"
		if len(mw.members) > 1 {
			noun = "members"
		}
		printWarnings(stderr, noun+" "+strings.Join(names, ", ")+more, []render.Warning{mw.warning})
	}
}
