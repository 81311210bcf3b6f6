package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/spf13/cobra"

	"pkgsync.dev/pkgsync/render"
	"pkgsync.dev/pkgsync/source"
)

func newLockCmd() *cobra.Command {
	var (
		registry registryOptions
		output   *outputFlag
	)
	cmd := &cobra.Command{
		Use:   "lock DIR",
		Short: "Resolve a package's images to digests and write manifest.lock.yaml",
		Long: `Lock resolves every image of the manifest's spec.images to its manifest digest, with one
request to its registry each, and writes them to manifest.lock.yaml next to the manifest (in
Package Operator's format, like "kubectl package update"). Templates then read .images.NAME as
REPOSITORY@DIGEST. A Package Operator package with images does not render without a lock file
that matches its manifest. References without a registry host are Docker Hub's. With
--registry-host-overrides or --image-prefix-overrides the digests are read where the overrides
point, and the lock file keeps the images as the manifest names them.

It prints the lock file's path on stdout and each image's digest on stderr; -o json and -o yaml
print both as one document instead: {"file":..,"images":[{"name":..,"image":..,"digest":..}]}.`,
		Example: `  pkgsync lock ./my-package
  pkgsync lock ./my-package -o json`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError("lock takes a package directory, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := output.check(); err != nil {
				return err
			}
			dir := args[0]
			fsys, err := readPackageDir(dir)
			if err != nil {
				return err
			}
			pkgDir, images, err := render.Images(fsys)
			if err != nil {
				return fmt.Errorf("lock %s: %w", dir, err)
			}
			refs := make([]source.Reference, 0, len(images))
			for _, img := range images {
				ref, err := imageReference(img.Image)
				if err != nil {
					return fmt.Errorf("lock %s: image %q: %w", dir, img.Name, err)
				}
				refs = append(refs, ref)
			}
			client, err := registry.client(cmd.ErrOrStderr(), refs...)
			if err != nil {
				return err
			}
			locked := make([]render.LockedImage, 0, len(images))
			for i, img := range images {
				dgst, err := client.Resolve(cmd.Context(), refs[i], nil)
				if err != nil {
					return fmt.Errorf("lock %s: image %q: %w", dir, img.Name, err)
				}
				if !output.document() {
					fmt.Fprintf(cmd.ErrOrStderr(), "%s: %s is %s\n", img.Name, img.Image, dgst)
				}
				locked = append(locked, render.LockedImage{Name: img.Name, Image: img.Image, Digest: dgst})
			}
			data, err := render.MarshalLock(locked)
			if err != nil {
				return fmt.Errorf("lock %s: %w", dir, err)
			}
			file := filepath.Join(dir, pkgDir, render.LockFile)
			if err := os.WriteFile(file, data, 0o644); err != nil {
				return fmt.Errorf("lock %s: %w", dir, err)
			}
			if output.document() {
				return output.writeDocument(cmd, "the lock result", lockReport{File: file, Images: locked})
			}
			fmt.Fprintln(cmd.OutOrStdout(), file)
			return nil
		},
	}
	registry.ApplyFlags(cmd.Flags())
	registry.overrides.ApplyFlags(cmd.Flags())
	output = addOutputFlag(cmd.Flags(), outputText)
	return cmd
}

// lockReport is lock's result as -o json and -o yaml print it: the lock file written and the
// images in it.
type lockReport struct {
	File   string               `json:"file"`
	Images []render.LockedImage `json:"images"`
}

// imageReference reads an image reference as container runtimes do: without a registry host
// it is Docker Hub's, without a tag it is :latest.
func imageReference(s string) (source.Reference, error) {
	ref, err := name.ParseReference(s)
	if err != nil {
		return source.Reference{}, err
	}
	out := source.Reference{Registry: ref.Context().RegistryStr(), Repository: ref.Context().RepositoryStr()}
	switch r := ref.(type) {
	case name.Digest:
		out.Digest = r.DigestStr()
	case name.Tag:
		out.Tag = r.TagStr()
	}
	return out, nil
}

// lockHint says how to fix a package whose images are not locked.
func lockHint(err error, dir string) string {
	if errors.Is(err, render.ErrImagesNotLocked) {
		return fmt.Sprintf("hint: run \"pkgsync lock %s\" to resolve the images and write %s", dir, render.LockFile)
	}
	return ""
}
