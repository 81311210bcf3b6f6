package source

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"time"

	"github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/content/memory"
	"sigs.k8s.io/yaml"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// pkoManifestAPIVersion is the apiVersion of Package Operator's manifest.yaml, accepted as is.
const pkoManifestAPIVersion = v1alpha1.PackageOperatorManifestAPIVersion

// manifestFiles are the names a package manifest may have, in order of preference.
var manifestFiles = []string{"manifest.yaml", "manifest.yml"}

// BuildOptions set what a build writes besides the files.
type BuildOptions struct {
	// Name overrides the package name taken from the manifest's metadata.name.
	Name string
	// Version is the package version (org.opencontainers.image.version), shown beside the
	// digest in the status of the Packages and fleets that install the image. A version
	// CleanVersion would not show (over 128 bytes, a character that is not printable) is refused.
	Version string
	// Source and Revision locate the sources (org.opencontainers.image.source/revision).
	Source, Revision string
	// Created, when not zero, is recorded as org.opencontainers.image.created. Left zero, the
	// build is reproducible: the same files give the same digest.
	Created time.Time
	// BuilderVersion is the version of the tool that builds, recorded in the image config as
	// pkgsyncVersion.
	BuilderVersion string
	// Annotations are extra manifest annotations; they win over the ones above.
	Annotations map[string]string
	// Limits bound the package, so that what is built can be pulled.
	Limits Limits
	// Validate, when set, checks the package directory before anything is built. The CLI
	// plugs in the render package's validation here.
	Validate func(fsys fs.FS) error
}

// Image is a built or loaded package image, held in memory until it is pushed or written.
type Image struct {
	// Digest is the manifest digest.
	Digest string
	// Name and Version are the package name and version, when known.
	Name, Version string
	// Attachments are what an OCI layout archive holds beside the image and about it (LoadLayout):
	// referrers whose subject is the image, and manifests under cosign's sha256-HEX.sig, .att or
	// .sbom tags of its digest, each with its blobs, for PushAttachments. Nil otherwise.
	Attachments []Attachment

	manifest []byte
	desc     ocispec.Descriptor
	store    oras.ReadOnlyTarget
}

// packageConfig is the config blob of a pkgsync package image.
type packageConfig struct {
	Name           string `json:"name"`
	Version        string `json:"version,omitempty"`
	PkgsyncVersion string `json:"pkgsyncVersion"`
}

// Build packs the package directory dir, read by LoadDir's rules (dot-files skipped, symbolic
// links and other non-regular files refused, opts.Limits), into an image. The validation hook
// sees the files as read, so it checks exactly what is packed.
func Build(dir string, opts BuildOptions) (*Image, error) {
	fail := func(err error) (*Image, error) { return nil, fmt.Errorf("build %s: %w", dir, err) }
	if opts.Version != "" && CleanVersion(opts.Version) == "" {
		return fail(fmt.Errorf("version %q is not shown by pkgsync: at most %d bytes of printable characters, without space at either end", opts.Version, MaxVersionLength))
	}
	limits := opts.Limits.withDefaults()
	fsys, err := LoadDir(dir, limits)
	if err != nil {
		return fail(err)
	}
	name, err := packageName(fsys)
	if err != nil {
		return fail(err)
	}
	if opts.Name != "" {
		name = opts.Name
	}
	if opts.Validate != nil {
		if err := opts.Validate(fsys); err != nil {
			return fail(fmt.Errorf("validate: %w", err))
		}
	}
	layer, err := packLayer(fsys, limits)
	if err != nil {
		return fail(err)
	}
	config, err := json.Marshal(packageConfig{Name: name, Version: opts.Version, PkgsyncVersion: opts.BuilderVersion})
	if err != nil {
		return fail(err)
	}

	annotations := map[string]string{ocispec.AnnotationTitle: name}
	for key, value := range map[string]string{
		ocispec.AnnotationVersion:  opts.Version,
		ocispec.AnnotationSource:   opts.Source,
		ocispec.AnnotationRevision: opts.Revision,
	} {
		if value != "" {
			annotations[key] = value
		}
	}
	if !opts.Created.IsZero() {
		annotations[ocispec.AnnotationCreated] = opts.Created.UTC().Format(time.RFC3339)
	}
	maps.Copy(annotations, opts.Annotations)

	configDesc := content.NewDescriptorFromBytes(ConfigMediaType, config)
	layerDesc := content.NewDescriptorFromBytes(ocispec.MediaTypeImageLayerGzip, layer)
	// The manifest is marshalled here rather than by oras.PackManifest, which stamps a created
	// annotation on every build and so would defeat reproducibility.
	manifest, err := json.Marshal(ocispec.Manifest{
		Versioned:    specs.Versioned{SchemaVersion: 2},
		MediaType:    ocispec.MediaTypeImageManifest,
		ArtifactType: ArtifactType,
		Config:       configDesc,
		Layers:       []ocispec.Descriptor{layerDesc},
		Annotations:  annotations,
	})
	if err != nil {
		return fail(err)
	}
	manifestDesc := content.NewDescriptorFromBytes(ocispec.MediaTypeImageManifest, manifest)
	manifestDesc.ArtifactType = ArtifactType

	store := memory.New()
	ctx := context.Background() // the memory store neither blocks nor honours cancellation
	for _, blob := range []struct {
		desc ocispec.Descriptor
		data []byte
	}{{configDesc, config}, {layerDesc, layer}, {manifestDesc, manifest}} {
		if err := store.Push(ctx, blob.desc, bytes.NewReader(blob.data)); err != nil {
			return fail(err)
		}
	}
	return &Image{
		Digest:   manifestDesc.Digest.String(),
		Name:     name,
		Version:  opts.Version,
		manifest: manifest,
		desc:     manifestDesc,
		store:    store,
	}, nil
}

// packageName reads metadata.name from the package manifest.
func packageName(fsys fs.FS) (string, error) {
	var (
		data []byte
		file string
		err  error
	)
	for _, file = range manifestFiles {
		if data, err = fs.ReadFile(fsys, file); err == nil || !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("no %s: a package directory has its manifest at the top", manifestFiles[0])
		}
		return "", err
	}
	var m v1alpha1.PackageManifest
	if err := yaml.Unmarshal(data, &m); err != nil {
		return "", fmt.Errorf("read %s: %w", file, err)
	}
	if m.Kind != v1alpha1.PackageManifestKind ||
		(m.APIVersion != v1alpha1.GroupVersion.String() && m.APIVersion != pkoManifestAPIVersion) {
		return "", fmt.Errorf("%s is %s %s, want %s %s (or %s)", file, m.APIVersion, m.Kind,
			v1alpha1.GroupVersion, v1alpha1.PackageManifestKind, pkoManifestAPIVersion)
	}
	if m.Name == "" {
		return "", fmt.Errorf("%s has no metadata.name", file)
	}
	return m.Name, nil
}

// CheckLayerSize packs fsys (a package as LoadDir read it) as Build does and returns the error
// Build would return for the compressed size of its layer: a *LimitError naming the files that
// add most, or nil. LoadDir bounds everything else; together they are every limit of a build,
// for commands that check a package without building it.
//
// A package that cannot reach the limit, whatever gzip makes of it, is not packed: most are a
// few KiB, and every command that reads a directory checks it.
func CheckLayerSize(fsys fs.FS, limits Limits) error {
	limits = limits.withDefaults()
	bound, err := layerBound(fsys)
	if err != nil {
		return err
	}
	if bound <= limits.MaxCompressedBytes {
		return nil
	}
	_, err = packLayer(fsys, limits)
	return err
}

// layerBound is more than packLayer can write for fsys: the tar stream's size (a header block,
// a PAX block and the name for every entry, the data in 512-byte blocks, the end) with an
// eighth more, beyond what deflate adds to data it cannot compress (a 9-bit code per byte at
// worst; stored blocks add 5 bytes in 65535), and 64 KiB for the rest.
func layerBound(fsys fs.FS) (int64, error) {
	const block = 512
	size := int64(2 * block)
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || name == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		size += 3*block + int64(len(name)) + (info.Size()+block-1)/block*block
		return nil
	})
	return size + size/8 + 64<<10, err
}

// packLayer writes the package, as LoadDir read it, as a reproducible tar+gzip layer: entries
// in lexical order, fixed modes, owner and timestamps, and a gzip header without name or time.
// The standard library does the encoding; the normalisation is what no library offers for a
// directory. LoadDir checked the entries and bounded the paths, their number and the bytes; only
// the compressed size is left to bound here, the error naming the files that add most.
func packLayer(fsys fs.FS, limits Limits) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	var files []FileSize
	// fs.WalkDir visits entries in lexical order, which makes the order reproducible.
	err = fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || name == "." {
			return err
		}
		hdr := &tar.Header{Name: name, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if d.IsDir() {
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, name+"/", 0o755
			return tw.WriteHeader(hdr)
		}
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o644, int64(len(data))
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		// Not flushed, which would change the bytes: the growth of the output is the file's
		// share, give or take a gzip block.
		before := buf.Len()
		_, err = tw.Write(data)
		files = append(files, FileSize{Path: name, Size: int64(len(data)), Compressed: int64(buf.Len() - before)})
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	if int64(buf.Len()) > limits.MaxCompressedBytes {
		return nil, &LimitError{Limit: LimitCompressedBytes, Max: limits.MaxCompressedBytes, Got: int64(buf.Len()),
			Files: largest(files, limits.MaxCompressedBytes, func(f FileSize) int64 { return f.Compressed })}
	}
	return buf.Bytes(), nil
}
