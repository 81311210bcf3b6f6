package verify

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"pkgsync.dev/pkgsync/source"
)

// A tenant names the image: every spelling that reaches a covered repository must be covered,
// or the policy is escaped by writing the image differently.
func TestRepositoryPrefixCoversEverySpelling(t *testing.T) {
	t.Parallel()
	tests := []struct {
		prefix, image string
		covered       bool
	}{
		// Path boundaries.
		{"registry.example.com/platform", "registry.example.com/platform:v1", true},
		{"registry.example.com/platform", "registry.example.com/platform/x:v1", true},
		{"registry.example.com/platform", "registry.example.com/platform/x/y@sha256:" + zeros, true},
		{"registry.example.com/platform", "registry.example.com/platformer:v1", false},
		{"registry.example.com/platform", "registry.example.com/platformer/x:v1", false},
		{"registry.example.com/platform", "registry.example.com/other/platform:v1", false},
		{"registry.example.com/platform/x", "registry.example.com/platform:v1", false},
		{"registry.example.com", "registry.example.com/anything/at/all:v1", true},
		{"registry.example.com", "registry.example.org/platform/x:v1", false},
		{"registry.example.com", "evil-registry.example.com/platform/x:v1", false},
		{"registry.example.com", "registry.example.com.evil.org/platform/x:v1", false},
		// The host's spellings.
		{"registry.example.com/platform", "REGISTRY.Example.COM/platform/x:v1", true},
		{"Registry.Example.com/platform", "registry.example.com/platform/x:v1", true},
		{"registry.example.com/platform", "registry.example.com./platform/x:v1", true},
		{"registry.example.com./platform", "registry.example.com/platform/x:v1", true},
		{"registry.example.com/platform/", "registry.example.com/platform/x:v1", true},
		{"registry.example.com/platform/", "registry.example.com/platformer:v1", false},
		{"registry.example.com/", "registry.example.com/x:v1", true},
		// Ports: none, or a default one, covers every port; another only itself.
		{"registry.example.com/platform", "registry.example.com:443/platform/x:v1", true},
		{"registry.example.com/platform", "registry.example.com:0443/platform/x:v1", true},
		{"registry.example.com/platform", "registry.example.com:80/platform/x:v1", true},
		{"registry.example.com/platform", "registry.example.com:5000/platform/x:v1", true},
		{"registry.example.com:443/platform", "registry.example.com/platform/x:v1", true},
		{"registry.example.com:5000/platform", "registry.example.com:5000/platform/x:v1", true},
		{"registry.example.com:5000/platform", "registry.example.com/platform/x:v1", false},
		{"registry.example.com:5000/platform", "registry.example.com:5001/platform/x:v1", false},
		{"127.0.0.1:5000/e2e", "127.0.0.1:5000/e2e/x:v1", true},
		{"[::1]:5000/e2e", "[0:0:0:0:0:0:0:1]:5000/e2e/x:v1", true},
		{"[::ffff:10.0.0.1]/e2e", "10.0.0.1/e2e/x:v1", true},
		// Docker Hub: one registry under four names, x and library/x one repository.
		{"docker.io/library/x", "docker.io/x:v1", true},
		{"docker.io/x", "docker.io/library/x:v1", true},
		{"docker.io/library/x", "index.docker.io/library/x:v1", true},
		{"docker.io/library/x", "registry-1.docker.io/x:v1", true},
		{"index.docker.io/library", "docker.io/x:v1", true},
		{"Docker.IO/library/x", "registry.hub.docker.com/library/x:v1", true},
		{"docker.io/org", "docker.io/org/app:v1", true},
		{"docker.io/library/x", "docker.io/xy:v1", false},
		{"docker.io/library/x", "docker.io/org/x:v1", false},
		{"docker.io/library/x", "quay.io/library/x:v1", false},
		{"registry.example.com/library/x", "registry.example.com/x:v1", false},
	}
	for _, tt := range tests {
		t.Run(tt.prefix+" "+tt.image, func(t *testing.T) {
			t.Parallel()
			ref, err := source.ParseReference(tt.image)
			require.NoError(t, err)
			assert.Equal(t, tt.covered, parseRepositoryPrefix(tt.prefix).covers(ref))
		})
	}
}

const zeros = "0000000000000000000000000000000000000000000000000000000000000000"

// The prefixes the matcher reads are the ones the CRD admits: its pattern refuses what the
// matcher would misread (a scheme, a tag, a digest, upper case in the path).
func TestRepositoryPrefixPattern(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", "pkgsync.dev_trustpolicies.yaml"))
	require.NoError(t, err)
	var crd apiextensionsv1.CustomResourceDefinition
	require.NoError(t, yaml.Unmarshal(data, &crd))
	items := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["repositories"].Items.Schema
	pattern := regexp.MustCompile(items.Pattern)
	for _, ok := range []string{"registry.example.com", "registry.example.com/platform", "registry.example.com/platform/",
		"REGISTRY.example.com./a/b", "registry.example.com:5000/a-b/c_d/e.f", "127.0.0.1:5000/e2e", "[::1]:5000/x", "localhost", "docker.io/library/x"} {
		assert.True(t, pattern.MatchString(ok), ok)
	}
	for _, bad := range []string{"", "https://registry.example.com/platform", "registry.example.com/Platform", "registry.example.com/platform:v1",
		"registry.example.com/platform@sha256:" + zeros, "registry.example.com//platform", "registry.example.com/platform/*", "/platform",
		"registry.example.com/../x", "registry.example.com/-x", " registry.example.com"} {
		assert.False(t, pattern.MatchString(bad), bad)
	}
}
