package source

import (
	"cmp"
	"fmt"
	"path"
	"slices"
	"strings"
)

// Limit names one bound of Limits, for callers that say which one a package exceeds.
type Limit string

// The bounds of Limits, by field.
const (
	LimitCompressedBytes   Limit = "MaxCompressedBytes"
	LimitUncompressedBytes Limit = "MaxUncompressedBytes"
	LimitFiles             Limit = "MaxFiles"
	LimitPathLength        Limit = "MaxPathLength"
)

// largestFiles is how many files a LimitError names: enough to find a stray file, few enough to
// read.
const largestFiles = 5

// FileSize is a file of a package and what it weighs.
type FileSize struct {
	// Path in the package; a directory's ends in "/".
	Path string
	// Size is the file's size in bytes, or a directory's number of entries for LimitFiles.
	Size int64
	// Compressed is about what the file adds to the compressed layer (LimitCompressedBytes
	// only): gzip writes its output in blocks, so a file's share is measured within a block.
	Compressed int64
}

// LimitError is a package directory that exceeds one of its Limits, with the files that count
// most towards it, so that whoever builds it can tell which to remove. It wraps ErrLimit. One
// type for LoadDir, CheckLayerSize and Build, so that validate and build say the same.
type LimitError struct {
	// Limit is the bound exceeded.
	Limit Limit
	// Max is its value, Got what the package has.
	Max, Got int64
	// Files are the files responsible, the largest first (at most 5): the long path, the
	// largest files, the directories with the most entries.
	Files []FileSize
}

func (e *LimitError) Unwrap() error { return ErrLimit }

func (e *LimitError) Error() string {
	var what string
	switch e.Limit {
	case LimitPathLength:
		return fmt.Sprintf("%s: path %s is longer than %d bytes (%d): shorten it", ErrLimit, e.Files[0].Path, e.Max, e.Got)
	case LimitFiles:
		what = fmt.Sprintf("the package has more than %d files and directories (%d); the most are in", e.Max, e.Got)
	case LimitUncompressedBytes:
		what = fmt.Sprintf("the package is larger than %d bytes (%d); the largest files:", e.Max, e.Got)
	default:
		what = fmt.Sprintf("the layer is %d bytes compressed, over %d; the files adding most:", e.Got, e.Max)
	}
	names := make([]string, 0, len(e.Files))
	for _, f := range e.Files {
		switch e.Limit {
		case LimitFiles:
			names = append(names, fmt.Sprintf("%s (%d)", f.Path, f.Size))
		case LimitCompressedBytes:
			names = append(names, fmt.Sprintf("%s (%d bytes, about %d compressed)", f.Path, f.Size, f.Compressed))
		default:
			names = append(names, fmt.Sprintf("%s (%d bytes)", f.Path, f.Size))
		}
	}
	return fmt.Sprintf("%s: %s %s: delete what the package does not need, or move it out of the package directory "+
		"or into a dot-directory (dot-files and dot-directories are not packed)", ErrLimit, what, strings.Join(names, ", "))
}

// largest returns the largest files first by key, at most largestFiles, leaving out those
// under 1% of limit after the first: they are not what to remove.
func largest(files []FileSize, limit int64, key func(FileSize) int64) []FileSize {
	files = slices.Clone(files)
	slices.SortStableFunc(files, func(a, b FileSize) int { return cmp.Compare(key(b), key(a)) })
	n := min(len(files), largestFiles)
	for n > 1 && key(files[n-1]) < limit/100 {
		n--
	}
	return files[:n]
}

// dirEntries counts the entries of each directory, for a LimitFiles error.
type dirEntries map[string]int64

func (d dirEntries) add(name string) {
	dir := path.Dir(name)
	if dir == "." {
		dir = ""
	}
	d[dir+"/"]++
}

func (d dirEntries) files() []FileSize {
	out := make([]FileSize, 0, len(d))
	for dir, n := range d {
		out = append(out, FileSize{Path: strings.TrimPrefix(dir, "/"), Size: n})
	}
	for i := range out {
		if out[i].Path == "" {
			out[i].Path = "./"
		}
	}
	slices.SortFunc(out, func(a, b FileSize) int { return cmp.Compare(a.Path, b.Path) })
	return largest(out, 0, func(f FileSize) int64 { return f.Size })
}
