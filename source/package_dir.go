package source

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"testing/fstest"
)

// LoadDir reads the package directory dir into memory by the rules a build packs it by, so
// that every command (build, validate, render, diff, apply, test, lock) sees the package a build
// would pack and nothing else:
//   - dot-files and dot-directories are skipped, as Package Operator does;
//   - a symbolic link, to a file or to a directory, and any other file that is not regular is an
//     error, with the same message whichever command meets it;
//   - limits (zero fields: DefaultLimits) bound the path lengths, the entries and the bytes, as
//     a pull bounds what it unpacks.
//
// dir itself may be a symbolic link: the operator named it. The result holds only directories
// and regular files, so nothing that reads it afterwards (templates' getFile, kustomize's
// generators, components) can follow a link the package planted to the operator's own files.
func LoadDir(dir string, limits Limits) (fs.FS, error) {
	// os.Root rather than os.DirFS: every open stays inside dir even if the tree changes while
	// it is read (an entry listed as a file, then swapped for a link to /etc): the link is
	// followed only when its target is inside dir.
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return LoadFS(root.FS(), limits)
}

// LoadFS reads fsys into memory by LoadDir's rules. Given an os.Root's FS, nothing outside the
// root is read; given os.DirFS, a link swapped in while the tree is read is followed.
func LoadFS(fsys fs.FS, limits Limits) (fs.FS, error) {
	limits = limits.withDefaults()
	out := fstest.MapFS{}
	var entries int
	var size int64
	// fs.WalkDir lists entries without following links (lstat), so a link is seen as one.
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if name == "." {
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if len(name) > limits.MaxPathLength {
			return fmt.Errorf("%w: path %s is longer than %d bytes", ErrLimit, name, limits.MaxPathLength)
		}
		if entries++; entries > limits.MaxFiles {
			return fmt.Errorf("%w: more than %d files", ErrLimit, limits.MaxFiles)
		}
		switch mode := d.Type(); {
		case d.IsDir():
			out[name] = &fstest.MapFile{Mode: dirMode}
			return nil
		case !mode.IsRegular():
			return &NotRegularError{Path: name, Mode: mode}
		}
		data, err := readRegular(fsys, name, limits.MaxUncompressedBytes-size)
		if errors.Is(err, ErrLimit) {
			return fmt.Errorf("%w: the package is larger than %d bytes", ErrLimit, limits.MaxUncompressedBytes)
		}
		if err != nil {
			return err
		}
		size += int64(len(data))
		out[name] = &fstest.MapFile{Data: data, Mode: fileMode}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// NotRegularError is an entry of a package directory that is neither a directory nor a regular
// file: a symbolic link, a device, a FIFO, a socket. One type, so that every command that reads a
// package directory refuses such an entry with the same message.
type NotRegularError struct {
	// Path is the entry's path, as the caller names it.
	Path string
	// Mode is the entry's type bits.
	Mode fs.FileMode
}

func (e *NotRegularError) Error() string {
	if e.Mode&fs.ModeSymlink != 0 {
		return fmt.Sprintf("%s is a symbolic link: packages hold regular files only, copy the target in its place", e.Path)
	}
	return fmt.Sprintf("%s is not a regular file (%s)", e.Path, e.Mode)
}

// readRegular reads the file name, at most left bytes (ErrLimit past that). The type is checked
// again on the open file, since the listing may be stale: what is read is a regular file.
func readRegular(fsys fs.FS, name string, left int64) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, &NotRegularError{Path: name, Mode: info.Mode().Type()}
	}
	if info.Size() > left {
		return nil, ErrLimit
	}
	// Bounded again while reading: the file may grow after Stat.
	data, err := io.ReadAll(io.LimitReader(f, left+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if int64(len(data)) > left {
		return nil, ErrLimit
	}
	return data, nil
}
