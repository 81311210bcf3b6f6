package render

import (
	"io/fs"
	"os"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A configuration key the schema does not declare is pruned, as the API server prunes unknown
// fields of a custom resource, and never in silence: each is a warning naming its path and the
// nearest declared name.
func TestRenderWarnsOfDroppedConfigKeys(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		dir    string
		config string
		want   []Warning
	}{{
		name:   "a typo of a declared name",
		dir:    "testdata/packages/config",
		config: "name: abc\nreplica: 3\n",
		want: []Warning{{Field: "config.replica",
			Message: "config.replica is not in the package's configuration schema and is dropped; did you mean replicas?"}},
	}, {
		name:   "nested, and far from any name",
		dir:    "testdata/packages/config",
		config: `{"name": "abc", "resources": {"cpux": "1"}, "zzzzzzzz": 1, "free": {"kept": 1}}`,
		want: []Warning{{Field: "config.resources.cpux",
			Message: "config.resources.cpux is not in the package's configuration schema and is dropped; did you mean cpu?"},
			{Field: "config.zzzzzzzz",
				Message: "config.zzzzzzzz is not in the package's configuration schema and is dropped (it declares free, mode, name, replicas, resources, tags)"}},
	}, {
		name:   "nothing dropped",
		dir:    "testdata/packages/config",
		config: "name: abc\nreplicas: 3\n",
	}, {
		name:   "a Package Operator package without a schema drops every key",
		config: "replicas: 3\n",
		want: []Warning{{Field: "config.replicas",
			Message: "config.replicas is dropped: the package declares no configuration schema"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var fsys fs.FS = fstest.MapFS{"manifest.yaml": {Data: []byte("apiVersion: manifests.package-operator.run/v1alpha1\nkind: PackageManifest\nmetadata: {name: p}\nspec:\n  scopes: [Namespaced]\n  phases: [{name: one}]\n")}}
			if tt.dir != "" {
				fsys = os.DirFS(tt.dir)
			}
			res, err := Render(t.Context(), fsys, Options{Config: []byte(tt.config)})
			require.NoError(t, err)
			assert.Equal(t, tt.want, res.Warnings)
		})
	}
}

// A warning is reported where a render fails too, since the dropped key is often why a required
// one is missing.
func TestConfigWarningsOfAFailedRender(t *testing.T) {
	t.Parallel()
	fsys := os.DirFS("testdata/packages/config")
	opts := Options{Config: []byte("nam: abc\n")}
	_, err := Render(t.Context(), fsys, opts)
	require.ErrorContains(t, err, "config.name")
	assert.Equal(t, []Warning{{Field: "config.nam",
		Message: "config.nam is not in the package's configuration schema and is dropped; did you mean name?"}}, ConfigWarnings(fsys, opts))
	assert.Nil(t, ConfigWarnings(os.DirFS("testdata/packages/bad-manifest"), opts))
}
