package render

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/opencontainers/go-digest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/yaml"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

const (
	// LockFile is the name of the lock file at a package's root: the digest of every image of
	// spec.images, as Package Operator's manifest.lock.yaml holds them.
	LockFile = "manifest.lock.yaml"
)

// ErrImagesNotLocked marks a package whose spec.images are not all in its lock file with the
// image the manifest names: the lock is missing or stale. A caller adds how to lock them.
var ErrImagesNotLocked = errors.New("images not locked")

// LockedImage is one image of spec.images resolved to its manifest digest.
type LockedImage = v1alpha1.PackageManifestLockImage

// Images reads a package's manifest (from the package root, or package/ in Package
// Operator's image layout) and returns the directory of fsys that is the package root, and
// spec.images.
func Images(fsys fs.FS) (string, []v1alpha1.PackageImage, error) {
	root, rootDir, err := packageRoot(fsys)
	if err != nil {
		return "", nil, err
	}
	dir := rootDir
	m, _, errs := readManifest(root)
	if m == nil || len(errs) > 0 {
		return "", nil, errs
	}
	return dir, m.Spec.Images, nil
}

// MarshalLock returns the lock file holding images, in Package Operator's format so that its
// tools read it too.
func MarshalLock(images []LockedImage) ([]byte, error) {
	l := v1alpha1.PackageManifestLock{
		TypeMeta: metav1.TypeMeta{APIVersion: pkoManifestAPIVersion, Kind: v1alpha1.PackageManifestLockKind},
		Spec:     v1alpha1.PackageManifestLockSpec{Images: images},
	}
	if l.Spec.Images == nil {
		l.Spec.Images = []LockedImage{}
	}
	return yaml.Marshal(l)
}

// lockedImages checks the lock file against spec.images and returns what templates see as
// .images: each image pinned to its locked digest (REPOSITORY@DIGEST, the tag dropped, as
// Package Operator renders it).
//
// A Package Operator manifest with images needs a lock file. pkgsync's own format may go
// without: its images are then given as written. A lock file that exists must match the
// manifest in both formats.
func lockedImages(fsys fs.FS, manifestFile string, m *v1alpha1.PackageManifest, pko bool) (map[string]any, Errors) {
	images := map[string]any{}
	data, err := fs.ReadFile(fsys, LockFile)
	if errors.Is(err, fs.ErrNotExist) {
		if pko && len(m.Spec.Images) > 0 {
			names := make([]string, 0, len(m.Spec.Images))
			for _, img := range m.Spec.Images {
				names = append(names, img.Name)
			}
			return nil, Errors{&Error{File: LockFile, Err: fmt.Errorf("%w: missing: %s names images (%s) but the package has no %s with their digests",
				ErrImagesNotLocked, manifestFile, strings.Join(names, ", "), LockFile)}}
		}
		for _, img := range m.Spec.Images {
			images[img.Name] = img.Image
		}
		return images, nil
	}
	if err != nil {
		return nil, Errors{&Error{File: LockFile, Err: fmt.Errorf("read lock file: %w", err)}}
	}

	// Decoded as Package Operator's type, strictly: metadata (which its tool writes) is read
	// and ignored; a field neither tool knows is refused by name.
	var lock v1alpha1.PackageManifestLock
	if err := yaml.UnmarshalStrict(data, &lock); err != nil {
		return nil, Errors{&Error{File: LockFile, Err: fmt.Errorf("decode lock file: %s", strings.TrimPrefix(err.Error(), "error unmarshaling JSON: while decoding JSON: "))}}
	}
	var errs Errors
	bad := func(field string, err error) {
		errs = append(errs, &Error{File: LockFile, Field: field, Err: err})
	}
	if lock.Kind != v1alpha1.PackageManifestLockKind {
		bad("kind", fmt.Errorf("must be %s, not %q", v1alpha1.PackageManifestLockKind, lock.Kind))
	}
	if lock.APIVersion != pkoManifestAPIVersion && lock.APIVersion != v1alpha1.GroupVersion.String() {
		bad("apiVersion", fmt.Errorf("must be %s (or %s), not %q", pkoManifestAPIVersion, v1alpha1.GroupVersion, lock.APIVersion))
	}
	if len(lock.Spec.Dependencies) > 0 {
		bad("spec.dependencies", errors.New("not supported: pkgsync does not install package dependencies"))
	}
	locked := map[string]LockedImage{}
	invalid := sets.New[string]() // reported already: not reported again as missing
	for i, li := range lock.Spec.Images {
		field := fmt.Sprintf("spec.images[%d]", i)
		switch {
		case li.Name == "":
			bad(field+".name", errors.New("required"))
			continue
		case sets.KeySet(locked).Has(li.Name) || invalid.Has(li.Name):
			bad(field+".name", fmt.Errorf("duplicate image %q", li.Name))
			continue
		case li.Image == "":
			bad(field+".image", fmt.Errorf("image %q: required", li.Name))
			invalid.Insert(li.Name)
			continue
		}
		if _, err := digest.Parse(li.Digest); err != nil {
			bad(field+".digest", fmt.Errorf("image %q: invalid digest %q: %w", li.Name, li.Digest, err))
			invalid.Insert(li.Name)
			continue
		}
		locked[li.Name] = li
	}
	declared := sets.New[string]()
	for _, img := range m.Spec.Images {
		declared.Insert(img.Name)
		li, ok := locked[img.Name]
		switch {
		case !ok && invalid.Has(img.Name):
			continue
		case !ok:
			bad("spec.images", fmt.Errorf("%w: image %q (%s) is not in the lock file", ErrImagesNotLocked, img.Name, img.Image))
			continue
		case li.Image != img.Image:
			bad("spec.images", fmt.Errorf("%w: stale: image %q is %s in %s but %s in the lock file", ErrImagesNotLocked, img.Name, img.Image, manifestFile, li.Image))
			continue
		}
		ref, err := name.ParseReference(img.Image)
		if err != nil {
			bad("spec.images", fmt.Errorf("image %q: %w", img.Name, err))
			continue
		}
		images[img.Name] = ref.Context().Digest(li.Digest).String()
	}
	for _, li := range lock.Spec.Images {
		if li.Name != "" && !declared.Has(li.Name) {
			bad("spec.images", fmt.Errorf("%w: stale: image %q is in the lock file but not in %s", ErrImagesNotLocked, li.Name, manifestFile))
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return images, nil
}
