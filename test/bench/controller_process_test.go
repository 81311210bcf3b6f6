package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDeploymentEnv: the benchmark runs the controller with the shipped Deployment's
// GOMEMLIMIT, found in the multi-document manifest.
func TestDeploymentEnv(t *testing.T) {
	t.Parallel()
	v, err := deploymentEnv("../../config/manager/manager.yaml", "GOMEMLIMIT")
	require.NoError(t, err)
	assert.NotEmpty(t, v)
	v, err = deploymentEnv("../../config/manager/manager.yaml", "NOT_SET")
	require.NoError(t, err)
	assert.Empty(t, v)
	_, err = deploymentEnv("../../config/crd/bases/pkgsync.dev_packages.yaml", "GOMEMLIMIT")
	assert.ErrorContains(t, err, "holds no Deployment")
}
