package render

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	digestA = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	digestB = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
)

// imagePackage is a package with two images, a template printing them, and the lock given
// (none when empty).
func imagePackage(apiVersion, lock string) fstest.MapFS {
	fsys := fstest.MapFS{
		"manifest.yaml": {Data: []byte(`apiVersion: ` + apiVersion + `
kind: PackageManifest
metadata: {name: p}
spec:
  scopes: [Namespaced]
  phases: [{name: deploy}]
  images:
  - {name: app, image: "quay.io/example/app:v1"}
  - {name: proxy, image: "nginx:1.27"}
`)},
		"cm.yaml.gotmpl": {Data: []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: images
  annotations: {pkgsync.dev/phase: deploy}
data:
  app: {{ .images.app }}
  proxy: {{ .images.proxy }}
`)},
	}
	if lock != "" {
		fsys[LockFile] = &fstest.MapFile{Data: []byte(lock)}
	}
	return fsys
}

func lockOf(images string) string {
	return "apiVersion: manifests.package-operator.run/v1alpha1\nkind: PackageManifestLock\nspec:\n  images:\n" + images
}

const (
	pkoAPI = "manifests.package-operator.run/v1alpha1"
	ownAPI = "pkgsync.dev/v1alpha1"
)

func TestImagesRenderLockedDigests(t *testing.T) {
	t.Parallel()
	lock := lockOf(`  - {name: app, image: "quay.io/example/app:v1", digest: ` + digestA + `}
  - {name: proxy, image: "nginx:1.27", digest: ` + digestB + `}
`)
	for _, api := range []string{pkoAPI, ownAPI} {
		t.Run(api, func(t *testing.T) {
			t.Parallel()
			res, err := Render(t.Context(), imagePackage(api, lock), Options{})
			require.NoError(t, err)
			data := res.Phases[0].Objects[0].Object["data"]
			assert.Equal(t, map[string]any{
				"app":   "quay.io/example/app@" + digestA,
				"proxy": "index.docker.io/library/nginx@" + digestB,
			}, data, "the locked digest, not the tag")
		})
	}
}

// lockAsKubectlPackageWrites is a lock file as Package Operator's `kubectl package update`
// writes it: its PackageManifestLock type marshalled to YAML, keys sorted, with the
// metadata its ObjectMeta always brings.
const lockAsKubectlPackageWrites = `apiVersion: manifests.package-operator.run/v1alpha1
kind: PackageManifestLock
metadata:
  creationTimestamp: null
spec:
  images:
  - digest: ` + digestA + `
    image: quay.io/example/app:v1
    name: app
  - digest: ` + digestB + `
    image: nginx:1.27
    name: proxy
`

// A lock file written by Package Operator's tool is read as it is: metadata included.
func TestImagesLockAsPackageOperatorWritesIt(t *testing.T) {
	t.Parallel()
	for _, api := range []string{pkoAPI, ownAPI} {
		t.Run(api, func(t *testing.T) {
			t.Parallel()
			res, err := Render(t.Context(), imagePackage(api, lockAsKubectlPackageWrites), Options{})
			require.NoError(t, err)
			assert.Equal(t, map[string]any{
				"app":   "quay.io/example/app@" + digestA,
				"proxy": "index.docker.io/library/nginx@" + digestB,
			}, res.Phases[0].Objects[0].Object["data"])
		})
	}
	// And pkgsync lock writes the same file. The apimachinery this is built with leaves the
	// zero creationTimestamp out, as Package Operator's releases built on it do too.
	lock, err := MarshalLock([]LockedImage{
		{Name: "app", Image: "quay.io/example/app:v1", Digest: digestA},
		{Name: "proxy", Image: "nginx:1.27", Digest: digestB},
	})
	require.NoError(t, err)
	assert.Equal(t, strings.Replace(lockAsKubectlPackageWrites, "metadata:\n  creationTimestamp: null\n", "metadata: {}\n", 1), string(lock))
}

// pkgsync's own format may go without a lock file: its images are then given as written.
func TestImagesOwnFormatWithoutLock(t *testing.T) {
	t.Parallel()
	res, err := Render(t.Context(), imagePackage(ownAPI, ""), Options{})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"app": "quay.io/example/app:v1", "proxy": "nginx:1.27"}, res.Phases[0].Objects[0].Object["data"])
}

func TestImagesLockErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		api, lock string
		notLocked bool
		want      []string
	}{
		{
			name: "no lock file", api: pkoAPI, notLocked: true,
			want: []string{"manifest.lock.yaml: images not locked: missing: manifest.yaml names images (app, proxy)"},
		},
		{
			name: "image missing from lock", api: pkoAPI, notLocked: true,
			lock: lockOf(`  - {name: app, image: "quay.io/example/app:v1", digest: ` + digestA + "}\n"),
			want: []string{`manifest.lock.yaml: spec.images: images not locked: image "proxy" (nginx:1.27) is not in the lock file`},
		},
		{
			name: "stale image", api: ownAPI, notLocked: true,
			lock: lockOf(`  - {name: app, image: "quay.io/example/app:v0", digest: ` + digestA + `}
  - {name: proxy, image: "nginx:1.27", digest: ` + digestB + "}\n"),
			want: []string{`stale: image "app" is quay.io/example/app:v1 in manifest.yaml but quay.io/example/app:v0 in the lock file`},
		},
		{
			name: "image only in lock", api: pkoAPI, notLocked: true,
			lock: lockOf(`  - {name: app, image: "quay.io/example/app:v1", digest: ` + digestA + `}
  - {name: proxy, image: "nginx:1.27", digest: ` + digestB + `}
  - {name: old, image: "quay.io/example/old:v1", digest: ` + digestB + "}\n"),
			want: []string{`stale: image "old" is in the lock file but not in manifest.yaml`},
		},
		{
			name: "bad digest", api: pkoAPI,
			lock: lockOf(`  - {name: app, image: "quay.io/example/app:v1", digest: "sha256:nope"}
  - {name: proxy, image: "nginx:1.27", digest: ` + digestB + "}\n"),
			want: []string{`manifest.lock.yaml: spec.images[0].digest: image "app": invalid digest "sha256:nope"`},
		},
		{
			name: "unknown field", api: pkoAPI,
			lock: lockOf(`  - {name: app, image: "quay.io/example/app:v1", digest: ` + digestA + ", tag: v1}\n"),
			want: []string{`manifest.lock.yaml: decode lock file: json: unknown field "tag"`},
		},
		{
			name: "unknown top-level field", api: pkoAPI,
			lock: lockAsKubectlPackageWrites + "status: {}\n",
			want: []string{`manifest.lock.yaml: decode lock file: json: unknown field "status"`},
		},
		{
			name: "unknown metadata field", api: pkoAPI,
			lock: strings.Replace(lockAsKubectlPackageWrites, "metadata:\n", "metadata:\n  colour: red\n", 1),
			want: []string{`manifest.lock.yaml: decode lock file: json: unknown field "colour"`},
		},
		{
			name: "empty name, image and digest", api: pkoAPI, notLocked: true,
			lock: lockOf(`  - {name: app, image: "quay.io/example/app:v1", digest: ` + digestA + `}
  - {name: proxy, image: "", digest: ` + digestB + `}
  - {name: "", image: "nginx:1.27", digest: ` + digestB + `}
  - {name: other, image: "nginx:1.27", digest: ""}
`),
			want: []string{
				`manifest.lock.yaml: spec.images[1].image: image "proxy": required`,
				`manifest.lock.yaml: spec.images[2].name: required`,
				`manifest.lock.yaml: spec.images[3].digest: image "other": invalid digest ""`,
			},
		},
		{
			name: "duplicate name", api: pkoAPI,
			lock: lockOf(`  - {name: app, image: "quay.io/example/app:v1", digest: ` + digestA + `}
  - {name: proxy, image: "nginx:1.27", digest: ` + digestB + `}
  - {name: app, image: "quay.io/example/app:v1", digest: ` + digestA + `}
`),
			want: []string{`manifest.lock.yaml: spec.images[2].name: duplicate image "app"`},
		},
		{
			name: "dependencies", api: pkoAPI,
			lock: lockOf(`  - {name: app, image: "quay.io/example/app:v1", digest: ` + digestA + `}
  - {name: proxy, image: "nginx:1.27", digest: ` + digestB + `}
  dependencies: [{name: x, image: quay.io/x, digest: ` + digestA + `, version: v1}]
`),
			want: []string{"manifest.lock.yaml: spec.dependencies: not supported"},
		},
		{
			name: "wrong kind", api: pkoAPI, notLocked: true,
			lock: "apiVersion: v1\nkind: ConfigMap\nspec: {images: []}\n",
			want: []string{"kind: must be PackageManifestLock", "apiVersion: must be"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Render(t.Context(), imagePackage(tt.api, tt.lock), Options{})
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.Equal(t, tt.notLocked, errors.Is(err, ErrImagesNotLocked))
			assert.NotContains(t, err.Error(), "template", "templates are not run without their images")
			// A build checks the lock too.
			assert.Error(t, ValidateStructure(t.Context(), imagePackage(tt.api, tt.lock), Options{}))
		})
	}
}

func TestImagesAndMarshalLockRoundTrip(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{}
	for name, f := range imagePackage(pkoAPI, "") {
		fsys["package/"+name] = f
	}
	dir, images, err := Images(fsys)
	require.NoError(t, err)
	assert.Equal(t, "package", dir, "Package Operator's image layout: the lock goes next to package/manifest.yaml")
	require.Len(t, images, 2)

	lock, err := MarshalLock([]LockedImage{
		{Name: images[0].Name, Image: images[0].Image, Digest: digestA},
		{Name: images[1].Name, Image: images[1].Image, Digest: digestB},
	})
	require.NoError(t, err)
	fsys["package/"+LockFile] = &fstest.MapFile{Data: lock}
	_, err = Render(t.Context(), fsys, Options{})
	require.NoError(t, err, "a written lock file is read back:\n%s", lock)
}
