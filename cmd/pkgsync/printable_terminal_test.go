//go:build linux

// Pseudo-terminals are opened with Linux ioctls.

package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/term"
)

// openTerminal opens a pseudo-terminal in raw mode (no line discipline rewriting what is
// written) and returns its terminal end and a function that returns everything written to it
// once it is closed.
func openTerminal(t *testing.T) (*os.File, func() string) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { ptmx.Close() })
	var unlock int32
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, ptmx.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock)))
	require.Zero(t, errno, "unlock the pseudo-terminal")
	var n uint32
	_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, ptmx.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n)))
	require.Zero(t, errno, "number of the pseudo-terminal")
	tty, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	_, err = term.MakeRaw(int(tty.Fd()))
	require.NoError(t, err)
	read := make(chan string, 1)
	go func() {
		var buf bytes.Buffer
		_, err := io.Copy(&buf, ptmx)
		var pathErr *os.PathError
		if err != nil && !errors.As(err, &pathErr) { // EIO once the terminal end is closed
			buf.WriteString(err.Error())
		}
		read <- buf.String()
	}()
	return tty, func() string {
		require.NoError(t, tty.Close())
		return <-read
	}
}

// On a terminal, YAML is read by a person: it goes through the filter like everything else.
func TestRenderYAMLOnATerminalIsEscaped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, body := range map[string]string{
		"manifest.yaml":  "apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata:\n  name: demo\nspec:\n  phases:\n  - name: deploy\n",
		"deploy/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n  annotations: {pkgsync.dev/phase: deploy}\ndata:\n  value: \"reads \\u202eright to left\"\n",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	}
	tty, screen := openTerminal(t)
	var stderr bytes.Buffer
	require.Zero(t, run([]string{"render", dir}, tty, &stderr), stderr.String())
	out := screen()
	assertPrintable(t, out, "render on a terminal")
	assert.Contains(t, out, `value: reads \u202eright to left`)
}
