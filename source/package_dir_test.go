package source

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/test/testenv"
)

func TestLoadDir(t *testing.T) {
	t.Parallel()
	dir := testenv.PackageDir(t)
	testenv.WriteTree(t, dir, map[string]string{".git/HEAD": "ref", "deploy/.swp": "x"})
	require.NoError(t, os.Mkdir(filepath.Join(dir, "empty"), 0o755))
	// The directory named on the command line may itself be a link: the operator chose it.
	link := filepath.Join(t.TempDir(), "pkg")
	require.NoError(t, os.Symlink(dir, link))

	fsys, err := LoadDir(link, Limits{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{
		"manifest.yaml":          testenv.PackageManifest,
		"deploy/deployment.yaml": "apiVersion: apps/v1\nkind: Deployment\n",
		"deploy/_helpers.tpl":    "{{ define \"x\" }}{{ end }}",
		"config.yaml.gotmpl":     "a: {{ .config.a }}\n",
	}, readTree(t, fsys), "dot-files skipped")
	info, err := fs.Stat(fsys, "empty")
	require.NoError(t, err)
	assert.True(t, info.IsDir(), "an empty directory is kept, as a build packs it")
}

func TestLoadDirRejects(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	testenv.WriteTree(t, outside, map[string]string{"passwd": "root"})
	tests := []struct {
		name     string
		setup    func(t *testing.T, dir string)
		limits   Limits
		wantErr  string
		wantType bool // a *NotRegularError
		wantLim  bool // ErrLimit
	}{{
		name: "link to a file outside",
		setup: func(t *testing.T, dir string) {
			require.NoError(t, os.Symlink(filepath.Join(outside, "passwd"), filepath.Join(dir, "deploy", "passwd")))
		},
		wantErr:  "deploy/passwd is a symbolic link: packages hold regular files only, copy the target in its place",
		wantType: true,
	}, {
		name:     "link to a directory",
		setup:    func(t *testing.T, dir string) { require.NoError(t, os.Symlink(outside, filepath.Join(dir, "etc"))) },
		wantErr:  "etc is a symbolic link: packages hold regular files only, copy the target in its place",
		wantType: true,
	}, {
		name: "link inside the package",
		setup: func(t *testing.T, dir string) {
			require.NoError(t, os.Symlink("manifest.yaml", filepath.Join(dir, "m.yaml")))
		},
		wantErr:  "m.yaml is a symbolic link",
		wantType: true,
	}, {
		name:     "FIFO",
		setup:    func(t *testing.T, dir string) { require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o600)) },
		wantErr:  "pipe is not a regular file",
		wantType: true,
	}, {
		name:    "too many entries",
		limits:  Limits{MaxFiles: 3},
		wantErr: "more than 3 files",
		wantLim: true,
	}, {
		name: "too many bytes",
		setup: func(t *testing.T, dir string) {
			testenv.WriteTree(t, dir, map[string]string{"big.yaml": strings.Repeat("x", 200)})
		},
		limits:  Limits{MaxUncompressedBytes: 150},
		wantErr: "the package is larger than 150 bytes",
		wantLim: true,
	}, {
		name:    "long path",
		limits:  Limits{MaxPathLength: 12},
		wantErr: "is longer than 12 bytes",
		wantLim: true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := testenv.PackageDir(t)
			if tt.setup != nil {
				tt.setup(t, dir)
			}
			_, err := LoadDir(dir, tt.limits)
			require.ErrorContains(t, err, tt.wantErr)
			var notRegular *NotRegularError
			assert.Equal(t, tt.wantType, errors.As(err, &notRegular))
			assert.Equal(t, tt.wantLim, errors.Is(err, ErrLimit))
		})
	}
}
