package source

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
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
//
// Every entry is looked at, so that every problem is reported at once (in DirErrors when there
// are several): each entry that is not a regular file, each path too long, and one *LimitError
// per bound of the whole package, naming the files that count most. Past the byte bound files
// are measured, not read, so memory stays bounded.
func LoadFS(fsys fs.FS, limits Limits) (fs.FS, error) {
	l := &dirLoader{fsys: fsys, limits: limits.withDefaults(), out: fstest.MapFS{}, dirs: dirEntries{}}
	// fs.WalkDir lists entries without following links (lstat), so a link is seen as one.
	if err := fs.WalkDir(fsys, ".", l.visit); err != nil {
		return nil, err
	}
	if l.entries > int64(l.limits.MaxFiles) {
		l.errs = append(l.errs, &LimitError{Limit: LimitFiles, Max: int64(l.limits.MaxFiles), Got: l.entries, Files: l.dirs.files()})
	}
	if l.size > l.limits.MaxUncompressedBytes {
		l.errs = append(l.errs, &LimitError{Limit: LimitUncompressedBytes, Max: l.limits.MaxUncompressedBytes, Got: l.size,
			Files: largest(l.files, l.limits.MaxUncompressedBytes, func(f FileSize) int64 { return f.Size })})
	}
	switch len(l.errs) {
	case 0:
		return l.out, nil
	case 1:
		return nil, l.errs[0]
	}
	return nil, l.errs
}

// dirLoader is one LoadFS: what it read, counted and found wrong so far.
type dirLoader struct {
	fsys    fs.FS
	limits  Limits
	out     fstest.MapFS
	entries int64
	size    int64
	dirs    dirEntries
	files   []FileSize
	errs    DirErrors
}

func (l *dirLoader) visit(name string, d fs.DirEntry, err error) error {
	if err != nil || name == "." {
		return err
	}
	if strings.HasPrefix(d.Name(), ".") {
		if d.IsDir() {
			return fs.SkipDir
		}
		return nil
	}
	// A path is named once, not again for every entry under it.
	if len(name) > l.limits.MaxPathLength && len(path.Dir(name)) <= l.limits.MaxPathLength {
		l.errs = append(l.errs, &LimitError{Limit: LimitPathLength, Max: int64(l.limits.MaxPathLength), Got: int64(len(name)), Files: []FileSize{{Path: name}}})
	}
	l.entries++
	l.dirs.add(name)
	switch mode := d.Type(); {
	case d.IsDir():
		l.out[name] = &fstest.MapFile{Mode: dirMode}
		return nil
	case !mode.IsRegular():
		l.errs = append(l.errs, &NotRegularError{Path: name, Mode: mode})
		return nil
	}
	if l.entries > int64(l.limits.MaxFiles) || l.size > l.limits.MaxUncompressedBytes {
		// Over a bound already: measured for the error, not read.
		info, err := d.Info()
		if err != nil {
			return err
		}
		l.count(name, info.Size())
		return nil
	}
	data, err := readRegular(l.fsys, name, l.limits.MaxUncompressedBytes-l.size)
	var tooLarge *tooLargeError
	if errors.As(err, &tooLarge) {
		l.count(name, tooLarge.size)
		return nil
	}
	if err != nil {
		return err
	}
	l.count(name, int64(len(data)))
	l.out[name] = &fstest.MapFile{Data: data, Mode: fileMode}
	return nil
}

// count adds a file's size to the package's.
func (l *dirLoader) count(name string, size int64) {
	l.size += size
	l.files = append(l.files, FileSize{Path: name, Size: size})
}

// DirErrors are the problems of one package directory, in the order they were found.
type DirErrors []error

func (e DirErrors) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d problems:", len(e))
	for _, err := range e {
		b.WriteString("\n  ")
		b.WriteString(err.Error())
	}
	return b.String()
}

func (e DirErrors) Unwrap() []error { return e }

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

// tooLargeError is a file larger than the bytes left, with the size seen so far.
type tooLargeError struct{ size int64 }

func (e *tooLargeError) Error() string { return fmt.Sprintf("%d bytes, over the bytes left", e.size) }
func (e *tooLargeError) Unwrap() error { return ErrLimit }

// readRegular reads the file name, at most left bytes (a *tooLargeError past that). The type is checked
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
		return nil, &tooLargeError{size: info.Size()}
	}
	// Bounded again while reading: the file may grow after Stat.
	data, err := io.ReadAll(io.LimitReader(f, left+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if int64(len(data)) > left {
		return nil, &tooLargeError{size: max(info.Size(), int64(len(data)))}
	}
	return data, nil
}
