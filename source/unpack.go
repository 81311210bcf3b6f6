package source

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"testing/fstest"
)

// Modes of unpacked entries; the archive's own modes are ignored, as nothing in a package is
// executable.
const (
	fileMode = 0o644
	dirMode  = fs.ModeDir | 0o755
)

// unpacker extracts tar layers into memory. archive/tar parses; the safety rules and limits
// are pkgsync's own, because no library offers extraction into memory with these checks.
//
// The result is a fstest.MapFS: the standard library's in-memory fs.FS, read-only in use,
// so one unpacked artifact can be shared by every caller.
type unpacker struct {
	limits Limits
	files  fstest.MapFS
	// dirs holds every directory implied by a file path, to reject a file that shadows one.
	dirs  map[string]bool
	bytes int64
	count int
	// reserve, when set, is called with a file's size before the file is read into memory.
	reserve func(n int64) error
}

func newUnpacker(limits Limits) *unpacker {
	return &unpacker{limits: limits.withDefaults(), files: fstest.MapFS{}, dirs: map[string]bool{}}
}

// unpack reads one layer. gzipped tells whether the layer is tar+gzip or plain tar.
func (u *unpacker) unpack(r io.Reader, gzipped bool) error {
	if gzipped {
		br := bufio.NewReader(r)
		if magic, err := br.Peek(2); err != nil || !bytes.Equal(magic, []byte{0x1f, 0x8b}) {
			return fmt.Errorf("%w: layer is not gzip-compressed although its media type says so", ErrUnsafeEntry)
		}
		zr, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("read gzip header: %w", err)
		}
		defer zr.Close()
		// Bound the decompressed stream, not only the file contents: tar headers and padding of
		// a hostile archive could otherwise expand without limit.
		r = &boundedReader{r: zr, left: 2*u.limits.MaxUncompressedBytes + 1<<20, limits: u.limits}
	}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read tar: %w", err)
		}
		if err := u.entry(hdr, tr); err != nil {
			return err
		}
	}
}

// entry checks and stores one tar entry.
func (u *unpacker) entry(hdr *tar.Header, r io.Reader) error {
	name, err := u.cleanPath(hdr.Name)
	if err != nil {
		return err
	}
	switch hdr.Typeflag {
	case tar.TypeReg, tar.TypeDir: // archive/tar reports old-style TypeRegA entries as these
	case tar.TypeSymlink:
		return fmt.Errorf("%w: %s is a symbolic link (to %s); packages hold regular files only", ErrUnsafeEntry, hdr.Name, hdr.Linkname)
	case tar.TypeLink:
		return fmt.Errorf("%w: %s is a hard link (to %s); packages hold regular files only", ErrUnsafeEntry, hdr.Name, hdr.Linkname)
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		return fmt.Errorf("%w: %s is a device or FIFO; packages hold regular files only", ErrUnsafeEntry, hdr.Name)
	default:
		return fmt.Errorf("%w: %s has unsupported tar entry type %q", ErrUnsafeEntry, hdr.Name, hdr.Typeflag)
	}
	if name == "" {
		return nil // the archive's root directory
	}
	if strings.HasPrefix(path.Base(name), ".wh.") {
		return fmt.Errorf("%w: %s is a layer whiteout, which package images do not use", ErrUnsafeEntry, hdr.Name)
	}
	if u.count++; u.count > u.limits.MaxFiles {
		return fmt.Errorf("%w: more than %d files", ErrLimit, u.limits.MaxFiles)
	}
	for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
		if f, ok := u.files[dir]; ok && !f.Mode.IsDir() {
			return fmt.Errorf("%w: %s lies under %s, which is a file", ErrUnsafeEntry, hdr.Name, dir)
		}
		u.dirs[dir] = true
	}
	if hdr.Typeflag == tar.TypeDir {
		if f, ok := u.files[name]; ok && !f.Mode.IsDir() {
			return fmt.Errorf("%w: directory %s replaces a file", ErrUnsafeEntry, hdr.Name)
		}
		u.files[name] = &fstest.MapFile{Mode: dirMode}
		u.dirs[name] = true
		return nil
	}
	if u.dirs[name] {
		return fmt.Errorf("%w: file %s replaces a directory", ErrUnsafeEntry, hdr.Name)
	}
	if hdr.Size < 0 || hdr.Size > u.limits.MaxUncompressedBytes-u.bytes {
		return fmt.Errorf("%w: %s makes the package larger than %d bytes uncompressed", ErrLimit, hdr.Name, u.limits.MaxUncompressedBytes)
	}
	if u.reserve != nil {
		if err := u.reserve(hdr.Size); err != nil {
			return fmt.Errorf("unpack %s: %w", hdr.Name, err)
		}
	}
	data := make([]byte, hdr.Size)
	if _, err := io.ReadFull(r, data); err != nil {
		return fmt.Errorf("read %s: %w", hdr.Name, err)
	}
	u.bytes += hdr.Size
	u.files[name] = &fstest.MapFile{Data: data, Mode: fileMode}
	return nil
}

// cleanPath turns an archive name into an fs.FS path ("" for the root), rejecting names that
// could leave the package directory.
func (u *unpacker) cleanPath(name string) (string, error) {
	if len(name) > u.limits.MaxPathLength {
		return "", fmt.Errorf("%w: path %.64s... is longer than %d bytes", ErrLimit, name, u.limits.MaxPathLength)
	}
	if strings.HasPrefix(name, "/") {
		return "", fmt.Errorf("%w: %s is an absolute path", ErrUnsafeEntry, name)
	}
	if strings.ContainsRune(name, 0) || strings.Contains(name, `\`) {
		return "", fmt.Errorf("%w: %q holds a NUL or backslash", ErrUnsafeEntry, name)
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return "", fmt.Errorf("%w: %s climbs out of the package (\"..\")", ErrUnsafeEntry, name)
		}
	}
	clean := path.Clean(name)
	if clean == "." {
		return "", nil
	}
	if !fs.ValidPath(clean) {
		return "", fmt.Errorf("%w: %q is not a valid path", ErrUnsafeEntry, name)
	}
	return clean, nil
}

// boundedReader fails once more than left bytes were read.
type boundedReader struct {
	r      io.Reader
	left   int64
	limits Limits
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("%w: layer decompresses to more than its %d-byte allowance", ErrLimit, 2*b.limits.MaxUncompressedBytes+1<<20)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}
