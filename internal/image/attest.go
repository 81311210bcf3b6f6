package image

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	slsa "github.com/in-toto/attestation/go/predicates/provenance/v1"
	intotov1 "github.com/in-toto/attestation/go/v1"
	spdxjson "github.com/spdx/tools-golang/json"
	"github.com/spdx/tools-golang/spdx/v2/common"
	spdx "github.com/spdx/tools-golang/spdx/v2/v2_3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"pkgsync.dev/pkgsync/internal/intoto"
)

// What the build says about itself: formats and types that cosign and admission policies know.
const (
	// BuildType names how release-image (hack/release-image) builds, for the provenance's buildDefinition: the
	// externalParameters and internalParameters it records are documented in
	// docs/operations.md (Supply chain).
	BuildType = "https://pkgsync.dev/image/v1"
	// DefaultBuilderID is the builder recorded when none is given: `make image` on a machine
	// that is not a CI runner with an identity of its own.
	DefaultBuilderID = "https://pkgsync.dev/builders/make-image/v1"
)

// Provenance describes the build for the SLSA provenance statement.
type Provenance struct {
	// Subject names the image (REGISTRY/REPOSITORY, no tag) and Digest is its index's digest.
	Subject, Digest string
	// BuilderID is the URI of what ran the build (runDetails.builder.id).
	BuilderID string
	// Command is the build command, without machine-dependent paths.
	Command []string
}

// moduleSet is every module linked into any of the binaries, and what each binary says of its build.
type moduleSet struct {
	goVersion string
	main      debug.Module
	deps      []*debug.Module
	builds    []binaryBuild
}

type binaryBuild struct {
	platform  string
	sha256    string
	goVersion string
	settings  []debug.BuildSetting
}

// readModules reads the Go build information of every binary (debug/buildinfo).
func readModules(binaries []Binary) (*moduleSet, error) {
	if len(binaries) == 0 {
		return nil, fmt.Errorf("no binaries")
	}
	set := &moduleSet{}
	byPath := map[string]*debug.Module{}
	for _, b := range binaries {
		info, err := buildinfo.ReadFile(b.Path)
		if err != nil {
			return nil, fmt.Errorf("read the build information of %s: %w", b.Path, err)
		}
		sum, err := fileSHA256(b.Path)
		if err != nil {
			return nil, err
		}
		if set.goVersion == "" {
			set.goVersion, set.main = info.GoVersion, info.Main
		} else if set.goVersion != info.GoVersion || set.main.Path != info.Main.Path {
			return nil, fmt.Errorf("%s is %s %s, not %s %s as the other binaries", b.Path, info.Main.Path, info.GoVersion, set.main.Path, set.goVersion)
		}
		set.builds = append(set.builds, binaryBuild{platform: b.Platform(), sha256: sum, goVersion: info.GoVersion, settings: info.Settings})
		for _, dep := range info.Deps {
			if dep.Replace != nil {
				dep = dep.Replace
			}
			if prev, ok := byPath[dep.Path]; ok {
				if prev.Version != dep.Version {
					return nil, fmt.Errorf("module %s is %s in one binary and %s in another", dep.Path, prev.Version, dep.Version)
				}
				continue
			}
			byPath[dep.Path] = dep
			set.deps = append(set.deps, dep)
		}
	}
	slices.SortFunc(set.deps, func(a, b *debug.Module) int { return strings.Compare(a.Path, b.Path) })
	return set, nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// purl is the package URL of a Go module (https://github.com/package-url/purl-spec).
func purl(path, version string) string {
	p := "pkg:golang/" + path
	if version != "" {
		p += "@" + version
	}
	return p
}

var spdxIDUnsafe = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

// SBOM is the SPDX 2.3 JSON document of the binaries: the pkgsync module at opts.Version, the
// Go standard library of the toolchain, and every module linked in, read from each binary's Go
// build information (debug/buildinfo), with its version, package URL and go.sum hash; and each
// binary with its SHA-256. Its creation time is opts.Created (the commit time) and nothing in it
// depends on the machine: the same commit gives the same bytes.
func SBOM(opts Options) ([]byte, error) {
	mods, err := readModules(opts.Binaries)
	if err != nil {
		return nil, fmt.Errorf("SBOM: %w", err)
	}
	mainVersion := opts.Version
	if mainVersion == "" {
		mainVersion = mods.main.Version
	}
	doc := &spdx.Document{
		SPDXVersion:       spdx.Version,
		DataLicense:       spdx.DataLicense,
		SPDXIdentifier:    "DOCUMENT",
		DocumentName:      "pkgsync-" + mainVersion,
		DocumentNamespace: "https://pkgsync.dev/spdx/pkgsync/" + mainVersion + "/" + opts.Revision,
		CreationInfo: &spdx.CreationInfo{
			Creators: []common.Creator{{CreatorType: "Tool", Creator: "pkgsync-image"}},
			Created:  opts.Created.UTC().Format(time.RFC3339),
		},
	}
	pkg := func(id, name, version, locator string) *spdx.Package {
		p := &spdx.Package{
			PackageName:             name,
			PackageSPDXIdentifier:   common.ElementID(spdxIDUnsafe.ReplaceAllString(id, "-")),
			PackageVersion:          version,
			PackageDownloadLocation: "NOASSERTION",
			PackageLicenseConcluded: "NOASSERTION",
			PackageLicenseDeclared:  "NOASSERTION",
			PackageCopyrightText:    "NOASSERTION",
		}
		if locator != "" {
			p.PackageExternalReferences = []*spdx.PackageExternalReference{{Category: "PACKAGE-MANAGER", RefType: "purl", Locator: locator}}
		}
		doc.Packages = append(doc.Packages, p)
		return p
	}
	relate := func(a, b common.ElementID, kind string) {
		doc.Relationships = append(doc.Relationships, &spdx.Relationship{
			RefA: common.MakeDocElementID("", string(a)), RefB: common.MakeDocElementID("", string(b)), Relationship: kind,
		})
	}
	main := pkg("Package-go-module-"+mods.main.Path, mods.main.Path, mainVersion, purl(mods.main.Path, mainVersion))
	main.PrimaryPackagePurpose = "APPLICATION"
	if opts.Source != "" {
		main.PackageDownloadLocation = "git+" + opts.Source
		if opts.Revision != "" {
			main.PackageDownloadLocation += "@" + opts.Revision
		}
	}
	relate("DOCUMENT", main.PackageSPDXIdentifier, "DESCRIBES")
	for _, b := range mods.builds {
		bin := pkg("Package-binary-"+b.platform, "pkgsync ("+b.platform+")", mainVersion, "")
		bin.PackageFileName = BinaryPath
		bin.PrimaryPackagePurpose = "APPLICATION"
		bin.PackageChecksums = []common.Checksum{{Algorithm: common.SHA256, Value: b.sha256}}
		relate(bin.PackageSPDXIdentifier, main.PackageSPDXIdentifier, "GENERATED_FROM")
		relate("DOCUMENT", bin.PackageSPDXIdentifier, "DESCRIBES")
	}
	std := pkg("Package-go-stdlib", "stdlib", mods.goVersion, purl("stdlib", mods.goVersion))
	relate(main.PackageSPDXIdentifier, std.PackageSPDXIdentifier, "DEPENDS_ON")
	for _, dep := range mods.deps {
		p := pkg("Package-go-module-"+dep.Path+"-"+dep.Version, dep.Path, dep.Version, purl(dep.Path, dep.Version))
		if dep.Sum != "" {
			p.PackageComment = "go.sum " + dep.Sum
		}
		relate(main.PackageSPDXIdentifier, p.PackageSPDXIdentifier, "DEPENDS_ON")
	}
	var buf bytes.Buffer
	if err := spdxjson.Write(doc, &buf, spdxjson.Indent("  "), spdxjson.EscapeHTML(false)); err != nil {
		return nil, fmt.Errorf("SBOM: %w", err)
	}
	return buf.Bytes(), nil
}

// ProvenanceStatement is the in-toto statement, SLSA provenance v1, of the image p.Digest: the
// builder, the source (repository and commit), the build command and parameters, the Go toolchain
// and every module linked in (with its go.sum hash, as a dirHash digest) as resolved
// dependencies, and each binary as a byproduct. It holds no time but the commit time and no path
// of the build machine (runDetails.metadata is left out: a build's start and end times would
// differ from build to build), so the same commit gives the same bytes.
func ProvenanceStatement(opts Options, p Provenance) ([]byte, error) {
	fail := func(err error) ([]byte, error) { return nil, fmt.Errorf("provenance: %w", err) }
	mods, err := readModules(opts.Binaries)
	if err != nil {
		return fail(err)
	}
	algorithm, hexDigest, ok := strings.Cut(p.Digest, ":")
	if !ok || algorithm != "sha256" {
		return fail(fmt.Errorf("image digest %q is not sha256:HEX", p.Digest))
	}
	builder := p.BuilderID
	if builder == "" {
		builder = DefaultBuilderID
	}
	deps := resolvedDependencies(opts, mods)
	byproducts, builds := buildRecords(mods)
	platforms := make([]any, len(opts.Binaries))
	for i, b := range opts.Binaries {
		platforms[i] = b.Platform()
	}
	command := make([]any, len(p.Command))
	for i, c := range p.Command {
		command[i] = c
	}
	external, err := structpb.NewStruct(map[string]any{
		"source":   map[string]any{"repository": opts.Source, "revision": opts.Revision},
		"version":  opts.Version,
		"created":  opts.Created.UTC().Format(time.RFC3339),
		"platform": platforms,
		"command":  command,
	})
	if err != nil {
		return fail(err)
	}
	internal, err := structpb.NewStruct(map[string]any{"builds": builds})
	if err != nil {
		return fail(err)
	}
	pred := &slsa.Provenance{
		BuildDefinition: &slsa.BuildDefinition{
			BuildType:            BuildType,
			ExternalParameters:   external,
			InternalParameters:   internal,
			ResolvedDependencies: deps,
		},
		RunDetails: &slsa.RunDetails{
			Builder:    &slsa.Builder{Id: builder},
			Byproducts: byproducts,
		},
	}
	if err := pred.Validate(); err != nil {
		return fail(err)
	}
	raw, err := protojson.Marshal(pred)
	if err != nil {
		return fail(err)
	}
	predStruct := &structpb.Struct{}
	if err := protojson.Unmarshal(raw, predStruct); err != nil {
		return fail(err)
	}
	return intoto.Statement(p.Subject, hexDigest, intoto.ProvenancePredicateType, predStruct)
}

// resolvedDependencies are the provenance's inputs: the source at its commit, the Go toolchain
// and every module linked in, with its go.sum hash as a dirHash digest.
func resolvedDependencies(opts Options, mods *moduleSet) []*intotov1.ResourceDescriptor {
	source := &intotov1.ResourceDescriptor{Uri: "git+" + opts.Source}
	if opts.Revision != "" {
		source.Uri += "@" + opts.Revision
	}
	if isGitCommit(opts.Revision) {
		source.Digest = map[string]string{"gitCommit": opts.Revision}
	}
	deps := []*intotov1.ResourceDescriptor{source, {Name: "go", Uri: purl("stdlib", mods.goVersion)}}
	for _, dep := range mods.deps {
		rd := &intotov1.ResourceDescriptor{Name: dep.Path, Uri: purl(dep.Path, dep.Version)}
		if h, ok := dirHash(dep.Sum); ok {
			rd.Digest = map[string]string{"dirHash": h}
		}
		deps = append(deps, rd)
	}
	return deps
}

// buildRecords are, per binary, its byproduct (name and SHA-256) and what its build
// information says of its build (platform, Go version, settings).
func buildRecords(mods *moduleSet) (byproducts []*intotov1.ResourceDescriptor, builds []any) {
	for _, b := range mods.builds {
		byproducts = append(byproducts, &intotov1.ResourceDescriptor{
			Name: "pkgsync_" + strings.ReplaceAll(b.platform, "/", "_"), Digest: map[string]string{"sha256": b.sha256},
		})
		settings := map[string]any{}
		for _, s := range b.settings {
			settings[s.Key] = s.Value
		}
		builds = append(builds, map[string]any{"platform": b.platform, "goVersion": b.goVersion, "settings": settings})
	}
	return byproducts, builds
}

func isGitCommit(rev string) bool {
	if len(rev) != 40 {
		return false
	}
	_, err := hex.DecodeString(rev)
	return err == nil
}

// dirHash turns a go.sum hash (h1:BASE64, the SHA-256 of the module's file list) into the hex
// the in-toto dirHash digest holds.
func dirHash(sum string) (string, bool) {
	b64, ok := strings.CutPrefix(sum, "h1:")
	if !ok {
		return "", false
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) != sha256.Size {
		return "", false
	}
	return hex.EncodeToString(raw), true
}
