package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"pkgsync.dev/pkgsync/internal/intoto"
	"pkgsync.dev/pkgsync/source"
)

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
		stmt, err := intoto.SBOMStatement(data, ref.Name(), ref.Digest)
		if err != nil {
			return nil, fmt.Errorf("--sbom %s: %w", f.sbom, err)
		}
		out = append(out, stmt)
	}
	return out, nil
}

// predicateTypes are cosign's names of predicate types (verify-attestation --type).
var predicateTypes = map[string]string{
	"slsaprovenance1": intoto.ProvenancePredicateType,
	"spdxjson":        intoto.SPDXPredicateType,
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
