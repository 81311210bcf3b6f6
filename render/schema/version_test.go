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
