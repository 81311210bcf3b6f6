package image

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// versionPackage is where the version stamps of the binary live.
const versionPackage = "pkgsync.dev/pkgsync/internal/version"

// GoBuild is one cross-compilation of the pkgsync binary.
type GoBuild struct {
	// Dir is the directory go runs in, inside the pkgsync module; empty is the working directory.
	Dir string
	// Package is the main package as go build takes it, relative to Dir: ./cmd/pkgsync.
	Package string
	// OS and Arch are the target platform (GOOS, GOARCH).
	OS, Arch string
	// Output is the file written.
	Output string
	// Version, Commit and Repository are stamped into internal/version when not empty.
	Version, Commit, Repository string
}

// BuildBinary runs go build for one platform with the settings that make the binary static and
// reproducible: CGO_ENABLED=0, -trimpath (no paths of the build machine), no symbol table or
// DWARF (-s -w; stack traces keep function names and lines), the baseline instruction set
// (GOAMD64=v1, GOARM64=v8.0) whatever the environment says. With the same source, Go toolchain
// and stamps, the output is byte for byte the same. The go command found in PATH is used.
func BuildBinary(ctx context.Context, b GoBuild) error {
	ldflags := []string{"-s", "-w"}
	for _, stamp := range []struct{ name, value string }{
		{"Version", b.Version}, {"Commit", b.Commit}, {"Repository", b.Repository},
	} {
		if stamp.value == "" {
			continue
		}
		if strings.ContainsAny(stamp.value, " \t\n'\"") {
			return fmt.Errorf("go build for %s/%s: %s %q: quotes and white space cannot be stamped",
				b.OS, b.Arch, strings.ToLower(stamp.name), stamp.value)
		}
		ldflags = append(ldflags, "-X", versionPackage+"."+stamp.name+"="+stamp.value)
	}
	args := []string{"build", "-trimpath", "-ldflags=" + strings.Join(ldflags, " "), "-o", b.Output, b.Package}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = b.Dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+b.OS, "GOARCH="+b.Arch, "GOAMD64=v1", "GOARM64=v8.0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build for %s/%s (in %s: go %s): %w\n%s", b.OS, b.Arch, dirOrCwd(b.Dir), strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

func dirOrCwd(dir string) string {
	if dir != "" {
		return dir
	}
	wd, err := os.Getwd()
	if err != nil {
		return "."
	}
	return wd
}
