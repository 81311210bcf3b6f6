package render

import (
	"io/fs"
	"os"
	"runtime"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

// memFS loads a package directory into memory, so that benchmarks measure rendering and not
// the disk (the controller renders from the unpacked image in memory too).
func memFS(b *testing.B, dir string) fstest.MapFS {
	b.Helper()
	out := fstest.MapFS{}
	require.NoError(b, fs.WalkDir(os.DirFS(dir), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(os.DirFS(dir), name)
		out[name] = &fstest.MapFile{Data: data, Mode: 0o644}
		return err
	}))
	return out
}

// BenchmarkRender renders the example packages: Go templates with a config schema, kustomize
// directories, and the Package Operator format.
func BenchmarkRender(b *testing.B) {
	cases := []struct {
		name string
		dir  string
		opts Options
	}{
		{"templates", "../packages-example/hosted-addon", Options{Name: "addon", Namespace: "clusters-demo", Environment: hostedEnv}},
		{"kustomize", "testdata/packages/kustomize-dirs", Options{Config: []byte(`{"message": "from config"}`)}},
		{"kustomize-root", "testdata/packages/kustomize-root", Options{}},
		{"package-operator", "testdata/packages/pko", Options{Name: "addon", Namespace: "clusters-demo", Environment: hostedEnv}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			fsys := memFS(b, c.dir)
			b.ReportAllocs()
			objects := 0
			for b.Loop() {
				res, err := Render(b.Context(), fsys, c.opts)
				if err != nil {
					b.Fatal(err)
				}
				objects = 0
				for _, p := range res.Phases {
					objects += len(p.Objects)
				}
			}
			b.ReportMetric(float64(objects), "objects/op")
			b.ReportMetric(float64(retainedBytes(b, fsys, c.opts)), "retained-B/result")
		})
	}
}

// retainedBytes is what one render result keeps reachable, as the controller's render cache
// holds it: the live heap with 50 results kept, less the live heap without them, over 50.
func retainedBytes(b *testing.B, fsys fs.FS, opts Options) int64 {
	b.Helper()
	const n = 50
	live := func() int64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	before := live()
	kept := make([]*Result, n)
	for i := range kept {
		res, err := Render(b.Context(), fsys, opts)
		require.NoError(b, err)
		kept[i] = res
	}
	after := live()
	runtime.KeepAlive(kept)
	return (after - before) / n
}
