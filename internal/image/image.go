package image

import (
	"errors"
	"fmt"
	"maps"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Binary is the pkgsync executable for one platform of the index.
type Binary struct {
	// OS and Arch name the platform, as GOOS and GOARCH do: linux, amd64.
	OS, Arch string
	// Path is the executable, a static (CGO_ENABLED=0) build; BuildBinary makes one.
	Path string
}

// Platform is OS/Arch.
func (b Binary) Platform() string { return b.OS + "/" + b.Arch }

// Options describe the image index to build.
type Options struct {
	// Binaries are the platforms of the index, in the order given.
	Binaries []Binary
	// Version, Revision and Source are recorded as the labels org.opencontainers.image.version,
	// .revision and .source.
	Version, Revision, Source string
	// Created is the commit time (SOURCE_DATE_EPOCH), recorded as the images' creation time,
	// the label org.opencontainers.image.created and the timestamp of the binary in its layer.
	// Never the build time: the same commit must give the same digest.
	Created time.Time
}

// Labels are the OCI labels of every image of the index, also set as the index's annotations.
func (o Options) Labels() map[string]string {
	labels := map[string]string{
		ocispec.AnnotationTitle:   "pkgsync",
		ocispec.AnnotationCreated: o.Created.UTC().Format(time.RFC3339),
	}
	for key, value := range map[string]string{
		ocispec.AnnotationSource:   o.Source,
		ocispec.AnnotationRevision: o.Revision,
		ocispec.AnnotationVersion:  o.Version,
	} {
		if value != "" {
			labels[key] = value
		}
	}
	return labels
}

// Build assembles the controller image index: per platform, an OCI image of a base layer (CA
// certificates, /etc/passwd and /etc/group with the non-root user, /tmp, /home/nonroot; the
// same for every platform) and a layer holding only the binary at /pkgsync, run as user 65532.
// Nothing is pulled: the result depends only on opts and the binaries, so the same inputs give
// the same digest.
func Build(opts Options) (v1.ImageIndex, error) {
	if len(opts.Binaries) == 0 {
		return nil, errors.New("build image: no binaries")
	}
	if opts.Created.IsZero() {
		return nil, errors.New("build image: no creation time; pass the commit time (SOURCE_DATE_EPOCH)")
	}
	base, err := newLayer(baseFiles())
	if err != nil {
		return nil, fmt.Errorf("build image: base layer: %w", err)
	}
	created := v1.Time{Time: opts.Created.UTC().Truncate(time.Second)}
	labels := opts.Labels()
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	seen := map[string]bool{}
	for _, b := range opts.Binaries {
		if b.OS == "" || b.Arch == "" {
			return nil, fmt.Errorf("build image: binary %s: platform %q: want OS/ARCH, such as linux/amd64", b.Path, b.Platform())
		}
		if seen[b.Platform()] {
			return nil, fmt.Errorf("build image: platform %s given twice", b.Platform())
		}
		seen[b.Platform()] = true
		img, err := platformImage(b, base, created, labels)
		if err != nil {
			return nil, fmt.Errorf("build image for %s: %w", b.Platform(), err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: b.OS, Architecture: b.Arch}},
		})
	}
	return mutate.Annotations(idx, labels).(v1.ImageIndex), nil
}

func platformImage(b Binary, base v1.Layer, created v1.Time, labels map[string]string) (v1.Image, error) {
	app, err := newLayer([]file{{name: BinaryPath[1:], mode: 0o755, modTime: created.Time, path: b.Path}})
	if err != nil {
		return nil, fmt.Errorf("binary layer: %w", err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: b.Arch,
		OS:           b.OS,
		Created:      created,
		Config: v1.Config{
			User:       fmt.Sprint(NonRootUID),
			Entrypoint: []string{BinaryPath},
			WorkingDir: "/",
			Labels:     maps.Clone(labels),
		},
	})
	if err != nil {
		return nil, err
	}
	return mutate.Append(img,
		mutate.Addendum{Layer: base, MediaType: types.OCILayer, History: v1.History{
			Created:   v1.Time{Time: time.Unix(0, 0).UTC()},
			CreatedBy: "release-image: base (CA certificates from golang.org/x/crypto/x509roots/fallback, passwd, group, /tmp, /home/nonroot)",
			Comment:   "built from scratch, no base image",
		}},
		mutate.Addendum{Layer: app, MediaType: types.OCILayer, History: v1.History{
			Created:   created,
			CreatedBy: "release-image: " + BinaryPath + " (CGO_ENABLED=0 go build -trimpath)",
		}},
	)
}
