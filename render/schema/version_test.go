package schema

import (
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestKubernetesVersion(t *testing.T) {
	t.Parallel()
	gomod, err := os.ReadFile("../../go.mod")
	require.NoError(t, err)
	// k8s.io/api v0.X.Y is Kubernetes 1.X.Y.
	m := regexp.MustCompile(`(?m)^\s+k8s\.io/api v0\.(\d+)\.`).FindSubmatch(gomod)
	require.NotNil(t, m, "k8s.io/api is not in go.mod")
	assert.Equal(t, "1."+string(m[1]), kubernetesVersion)
}

func TestParseRelease(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]Release{
		"v1.30.0": {1, 30}, "1.30": {1, 30}, "v1.31.0-rc.1": {1, 31}, "1.36.3": {1, 36}, "v2.0": {2, 0},
	} {
		got, ok := ParseRelease(in)
		assert.True(t, ok, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"master", "", "1", "v1.x", "0.30", "latest"} {
		_, ok := ParseRelease(in)
		assert.False(t, ok, in)
	}
	assert.True(t, Release{}.BuiltIn())
	assert.True(t, Release{1, 36}.BuiltIn())
	assert.False(t, Release{1, 35}.BuiltIn())
	assert.Equal(t, "1.36", Release{}.String())
}

// For an older release the checker applies that release's rules it knows: a Service's name
// was a DNS-1035 label before 1.36, so "1-api" is refused there and taken by 1.36.
func TestCheckerForRelease(t *testing.T) {
	t.Parallel()
	svc := object(t, "apiVersion: v1\nkind: Service\nmetadata: {name: 1-api}\nspec: {ports: [{port: 80}]}\n")
	problems, _ := New().Check(svc)
	assert.Empty(t, problems)
	problems, _ = New().For(Release{1, 37}).Check(svc)
	assert.Empty(t, problems, "nothing newer is known")
	problems, _ = New().For(Release{1, 35}).Check(svc)
	require.Len(t, problems, 1)
	assert.Equal(t, "metadata.name", problems[0].Field)
	assert.Contains(t, problems[0].Detail, "a DNS-1035 label must")

	assert.Empty(t, ReleaseRules(Release{}))
	assert.Empty(t, ReleaseRules(Release{1, 36}))
	assert.Empty(t, ReleaseRules(Release{1, 37}))
	assert.Equal(t, []string{"a Service's metadata.name is a DNS-1035 label (starting with a letter), as before Kubernetes 1.36"}, ReleaseRules(Release{1, 30}))
}
