package apply_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/desired"
)

// TestAggregatedClusterRoleRulesAreLeftToTheController (issue 42): a ClusterRole with an
// aggregationRule, written as the Kubernetes docs write it (rules: []), has its rules filled by
// kube-controller-manager's aggregation controller. pkgsync sets them on creation and leaves them
// afterwards, as ignoreFields does, without the author saying so: no Conflict, no fight.
func TestAggregatedClusterRoleRulesAreLeftToTheController(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	engine := apply.NewEngine(apply.Options{})
	name := "aggregated-" + e.ns
	role := e.obj(t, `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: `+name+`
aggregationRule:
  clusterRoleSelectors:
  - matchLabels: {example.com/aggregate-to-`+e.ns+`: "true"}
rules: []
`)
	req := apply.Request{Owner: e.owner, Targets: e.targets,
		Phases: []desired.Phase{{Name: "one", Objects: []*unstructured.Unstructured{role}}}}
	res, err := engine.Apply(t.Context(), req)
	require.NoError(t, err)
	req.Previous = res.Inventory
	t.Cleanup(func() {
		_ = e.mgmt.Delete(context.Background(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})

	// The aggregation controller writes the rules of the roles it selects (with an update, as
	// kube-controller-manager does).
	var live rbacv1.ClusterRole
	require.NoError(t, e.mgmt.Get(t.Context(), client.ObjectKey{Name: name}, &live))
	live.Rules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}
	require.NoError(t, e.mgmt.Update(t.Context(), &live, client.FieldOwner("clusterrole-aggregation-controller")))

	res, err = engine.Apply(t.Context(), req)
	require.NoError(t, err, "no conflict over the rules")
	assert.True(t, res.Complete())
	require.NoError(t, e.mgmt.Get(t.Context(), client.ObjectKey{Name: name}, &live))
	assert.Len(t, live.Rules, 1, "the controller's rules are kept")

	// A new revision of the role changes its selector: applied, the rules still the controller's.
	role2 := role.DeepCopy()
	role2.SetAnnotations(map[string]string{"example.com/revision": "2"})
	req.Phases[0].Objects[0] = role2
	_, err = engine.Apply(t.Context(), req)
	require.NoError(t, err)
	require.NoError(t, e.mgmt.Get(t.Context(), client.ObjectKey{Name: name}, &live))
	assert.Equal(t, "2", live.Annotations["example.com/revision"])
	assert.Len(t, live.Rules, 1)
}
