package main

import (
	"fmt"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/spf13/pflag"

	"pkgsync.dev/pkgsync/internal/image"
)

// attachFlags say where release-image writes the SBOM and the provenance it attaches.
type attachFlags struct {
	sbom, provenance, builderID string
}

func (f *attachFlags) ApplyFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.sbom, "sbom", "", "Also write the SBOM (SPDX 2.3 JSON) attached to the image to this file (make image: dist/pkgsync.spdx.json)")
	fs.StringVar(&f.provenance, "provenance", "", "Also write the SLSA provenance v1 in-toto statement attached to the image to this file (make image: dist/provenance.intoto.json)")
	fs.StringVar(&f.builderID, "builder-id", image.DefaultBuilderID, "URI of what runs the build, recorded as the provenance's builder (a CI system passes its own)")
}

// write makes the SBOM and the provenance of idx, writes them where the flags say, and returns
// them as attachments of idx.
func (f *attachFlags) write(idx v1.ImageIndex, opts image.Options, subject string, command []string) ([]image.Attachment, error) {
	d, err := idx.Digest()
	if err != nil {
		return nil, fmt.Errorf("build image: %w", err)
	}
	size, err := idx.Size()
	if err != nil {
		return nil, fmt.Errorf("build image: %w", err)
	}
	sbom, err := image.SBOM(opts)
	if err != nil {
		return nil, err
	}
	prov, err := image.ProvenanceStatement(opts, image.Provenance{
		Subject: subject, Digest: d.String(), BuilderID: f.builderID, Command: command,
	})
	if err != nil {
		return nil, err
	}
	for _, out := range []struct {
		file string
		data []byte
	}{{f.sbom, sbom}, {f.provenance, prov}} {
		if out.file == "" {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(out.file), 0o755); err != nil {
			return nil, fmt.Errorf("write %s: %w", out.file, err)
		}
		if err := os.WriteFile(out.file, out.data, 0o644); err != nil { //nolint:gosec // published, not secret
			return nil, fmt.Errorf("write %s: %w", out.file, err)
		}
	}
	subjectDesc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageIndex, Digest: digest.Digest(d.String()), Size: size}
	return image.Attachments(subjectDesc, sbom, prov, opts.Created)
}
