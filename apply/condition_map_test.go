package apply_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/desired"
)

// A phase's condition mappings report conditions of its live objects, under their destination
// types, once the object's controller has set them.
func TestConditionMappingsReportObjectConditions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	engine := apply.NewEngine(apply.Options{})
	req := apply.Request{
		Owner: e.owner,
		Phases: []desired.Phase{{
			Name:    "deploy",
			Objects: []*unstructured.Unstructured{e.configMap(t, "first", nil), e.obj(t, deploymentYAML)},
			ConditionMappings: []desired.ConditionMapping{
				{Object: 1, Source: "Available", Destination: "example.com/WebAvailable"},
				{Object: 1, Source: "Missing", Destination: "example.com/Missing"},
			},
		}},
		Targets: e.targets,
	}
	res, err := engine.Apply(t.Context(), req)
	require.NoError(t, err)
	assert.Empty(t, res.Conditions, "the Deployment has no conditions yet")

	setDeploymentAvailable(t, e.mgmt, e.ns, "web")
	req.Previous = res.Inventory
	res, err = engine.Apply(t.Context(), req)
	require.NoError(t, err)
	assert.True(t, res.Complete(), res.Summary())
	assert.Equal(t, []metav1.Condition{{
		Type: "example.com/WebAvailable", Status: metav1.ConditionTrue, Reason: "MinimumReplicasAvailable",
		Message: "Deployment.apps " + e.ns + "/web: condition Available",
	}}, res.Conditions)
}
