package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"pkgsync.dev/pkgsync/source"
)

// openPackage opens the package argument of render, validate, diff and apply: an existing
// directory is read from disk as build reads it (readPackageDir), anything else is a registry
// reference pulled with the registry flags. image is the reference for .package.image in
// templates, as the controller sets it; empty for a directory.
func (o *registryOptions) openPackage(ctx context.Context, arg string, stderr io.Writer) (fsys fs.FS, image string, err error) {
	info, statErr := os.Stat(arg)
	switch {
	case statErr == nil && info.IsDir():
		fsys, err := readPackageDir(arg)
		return fsys, "", err
	case statErr == nil:
		return nil, "", usageError("%s is a file: pass a package directory or a registry reference", arg)
	case !errors.Is(statErr, fs.ErrNotExist):
		return nil, "", fmt.Errorf("open package %s: %w", arg, statErr)
	}
	refs, err := parseReferences(arg)
	if err == nil && refs[0].Tag == "" && refs[0].Digest == "" {
		// A missing relative directory such as ./pkg parses as a reference without tag or digest.
		err = fmt.Errorf("a reference names a tag or a digest: REGISTRY/REPOSITORY:TAG or @DIGEST")
	}
	if err != nil {
		return nil, "", usageError("%s is neither a directory nor a registry reference: %w", arg, err)
	}
	client, err := o.client(stderr, refs...)
	if err != nil {
		return nil, "", err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	artifact, err := client.Pull(ctx, refs[0], nil)
	if err != nil {
		return nil, "", err
	}
	return artifact.FS, refs[0].String(), nil
}

// readPackageDir reads a package directory for every command but build (which does the same
// inside source.Build): by build's rules and every one of its limits, the compressed size of the
// layer included, with build's messages, so that what a command renders is what a build would
// pack, and a symbolic link in a directory cloned from someone else's repository cannot make it
// read the operator's own files. Packing to measure costs little next to a render for a package
// of manifests; it is what tells a stray file before build does.
func readPackageDir(dir string) (fs.FS, error) {
	fsys, err := source.LoadDir(dir, source.Limits{})
	if err == nil {
		err = source.CheckLayerSize(fsys, source.Limits{})
	}
	if err != nil {
		return nil, fmt.Errorf("read package %s: %w", dir, err)
	}
	return fsys, nil
}
