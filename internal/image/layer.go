package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// file is one entry of a layer: a directory (name ends in "/"), or a regular file whose content
// is data or, when path is set, the file at path.
type file struct {
	name    string
	mode    int64
	modTime time.Time
	uid     int
	data    []byte
	path    string
}

// newLayer packs files, in the order given, into a tar+gzip OCI layer. Everything that could
// differ between two builds is fixed: the order, owners (numeric, no names), modes, timestamps,
// the tar format (USTAR, no access or change times) and the gzip header (no name, no time).
func newLayer(files []file) (v1.Layer, error) {
	var buf bytes.Buffer
	gz, err := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(gz)
	for _, f := range files {
		if err := writeEntry(tw, f); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", f.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	blob := buf.Bytes()
	// The opener hands out the compressed bytes; go-containerregistry recognises them as gzip
	// and uses them as they are.
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(blob)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

func writeEntry(tw *tar.Writer, f file) error {
	hdr := &tar.Header{
		Name:    f.name,
		Mode:    f.mode,
		ModTime: f.modTime.UTC().Truncate(time.Second),
		Uid:     f.uid,
		Gid:     f.uid,
		Format:  tar.FormatUSTAR,
	}
	if strings.HasSuffix(f.name, "/") {
		hdr.Typeflag = tar.TypeDir
		return tw.WriteHeader(hdr)
	}
	hdr.Typeflag = tar.TypeReg
	if f.path == "" {
		hdr.Size = int64(len(f.data))
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err := tw.Write(f.data)
		return err
	}
	in, err := os.Open(f.path)
	if err != nil {
		return err
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", f.path)
	}
	hdr.Size = info.Size()
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	n, err := io.Copy(tw, in)
	if err != nil {
		return err
	}
	if n != hdr.Size {
		return fmt.Errorf("%s changed while it was read", f.path)
	}
	return nil
}
