package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"pkgsync.dev/pkgsync/internal/image"
	"pkgsync.dev/pkgsync/source"
)

// attachFlags say where `pkgsync image` writes the SBOM and the provenance it attaches.
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

// pushAttachments pushes the attachments next to the image in the repository of every ref.
func pushAttachments(cmd *cobra.Command, registry *registryOptions, refs []source.Reference, attachments []image.Attachment, text bool) error {
	if len(attachments) == 0 {
		return nil
	}
	client, err := registry.client(cmd.ErrOrStderr(), refs...)
	if err != nil {
		return err
	}
	converted := make([]source.Attachment, len(attachments))
	for i, a := range attachments {
		converted[i] = source.Attachment{Tag: a.Tag, Manifest: a.Manifest, Descriptor: a.Descriptor, Blobs: a.Blobs}
	}
	seen := map[string]bool{}
	for _, ref := range refs {
		if seen[ref.Name()] {
			continue
		}
		seen[ref.Name()] = true
		if err := client.PushAttachments(cmd.Context(), ref, converted, nil); err != nil {
			return err
		}
		if text {
			fmt.Fprintf(cmd.OutOrStdout(), "Attached the SBOM and provenance in %s\n", ref.Name())
		}
	}
	return nil
}

// attestFlags are the statements `pkgsync sign` signs as attestations of the image.
type attestFlags struct {
	sbom, provenance string
}

func (f *attestFlags) ApplyFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.sbom, "sbom", "", "SPDX JSON SBOM of the image (dist/pkgsync.spdx.json) to sign as an attestation (cosign verify-attestation --type spdxjson)")
	fs.StringVar(&f.provenance, "provenance", "", "In-toto provenance statement of the image (dist/provenance.intoto.json) to sign as an attestation "+
		"(cosign verify-attestation --type slsaprovenance1); it must be about the image's digest")
}

func (f *attestFlags) any() bool { return f.sbom != "" || f.provenance != "" }

// statements reads the files and returns the in-toto statements to sign about ref's digest.
// about pins ref to the digest its tag resolves to now and reads the statements about that
// digest: the signature and the attestations are about one digest, whatever the tag does
// meanwhile.
func (f *attestFlags) about(ctx context.Context, client *source.Client, ref source.Reference) (source.Reference, [][]byte, error) {
	d, err := client.Resolve(ctx, ref, nil)
	if err != nil {
		return source.Reference{}, nil, err
	}
	ref = ref.WithDigest(d)
	statements, err := f.statements(ref)
	return ref, statements, err
}

func (f *attestFlags) statements(ref source.Reference) ([][]byte, error) {
	var out [][]byte
	if f.provenance != "" {
		data, err := os.ReadFile(f.provenance)
		if err != nil {
			return nil, fmt.Errorf("read --provenance: %w", err)
		}
		out = append(out, data)
	}
	if f.sbom != "" {
		data, err := os.ReadFile(f.sbom)
		if err != nil {
			return nil, fmt.Errorf("read --sbom: %w", err)
		}
		stmt, err := image.SBOMStatement(data, ref.Name(), ref.Digest)
		if err != nil {
			return nil, fmt.Errorf("--sbom %s: %w", f.sbom, err)
		}
		out = append(out, stmt)
	}
	return out, nil
}

// predicateTypes are cosign's names of predicate types (verify-attestation --type).
var predicateTypes = map[string]string{
	"slsaprovenance1": image.ProvenancePredicateType,
	"spdxjson":        image.SPDXPredicateType,
}

// predicateType reads a --attestation value: one of cosign's names, or a predicate type URI.
func predicateType(name string) (string, error) {
	if t, ok := predicateTypes[name]; ok {
		return t, nil
	}
	if strings.Contains(name, "://") {
		return name, nil
	}
	return "", usageError("--attestation %q: want slsaprovenance1, spdxjson or a predicate type URI", name)
}
