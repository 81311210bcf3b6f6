package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRenderComponentFlag(t *testing.T) {
	t.Parallel()
	const dir = "../../render/testdata/packages/pko-components"
	out, stderr, err := runCLI(t, "render", dir, "--component", "backend", "-n", "apps")
	require.NoError(t, err, stderr)
	assert.Contains(t, out, "name: shop-backend-api")
	assert.NotContains(t, out, "shop-root")

	out, _, err = runCLI(t, "validate", dir)
	require.NoError(t, err)
	assert.Equal(t, dir+": valid\n", out)

	_, stderr, err = runCLI(t, "validate", dir, "--component", "payments")
	require.Error(t, err)
	assert.Contains(t, stderr, `no component "payments": the package has backend, frontend`)
}
