package apply_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/desired"
)

// TestConfinedClassStaysInItsNamespace: objects of a confined class are checked against the
// API server's scope of their kind before anything is written, whatever metadata.namespace says.
func TestConfinedClassStaysInItsNamespace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	engine := apply.NewEngine(apply.Options{})
	// A ClusterRoleBinding that names the namespace, as if that made it namespaced.
	binding := e.obj(t, `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: placeholder, namespace: NS}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{kind: ServiceAccount, name: default, namespace: NS}]
`)
	binding.SetName(e.ns + "-escalate")
	elsewhere := e.configMap(t, "elsewhere", nil)
	elsewhere.SetNamespace("default")
	first := e.configMap(t, "first", nil)
	unknown := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Unserved", "metadata": map[string]any{"name": "x", "namespace": e.ns},
	}}

	for name, tc := range map[string]struct {
		objects []*unstructured.Unstructured
		check   func(t *testing.T, err error)
	}{
		"cluster-scoped kind with a namespace": {[]*unstructured.Unstructured{first, binding}, func(t *testing.T, err error) {
			var confined *apply.ConfinementError
			require.ErrorAs(t, err, &confined)
			assert.Equal(t, []string{"ClusterRoleBinding " + binding.GetName() + " (cluster-scoped)"}, confined.Objects)
		}},
		"another namespace": {[]*unstructured.Unstructured{first, elsewhere}, func(t *testing.T, err error) {
			var confined *apply.ConfinementError
			require.ErrorAs(t, err, &confined)
			assert.Equal(t, []string{"ConfigMap default/elsewhere"}, confined.Objects)
		}},
		"kind the cluster does not serve": {[]*unstructured.Unstructured{first, unknown}, func(t *testing.T, err error) {
			require.Error(t, err)
			assert.True(t, meta.IsNoMatchError(err), "%v", err)
			assert.ErrorContains(t, err, "can only be of kinds the cluster already serves")
		}},
	} {
		t.Run(name, func(t *testing.T) {
			req := apply.Request{Owner: e.owner, Targets: e.targets, DefaultNamespace: e.ns, Confine: map[string]string{"": e.ns},
				// The offending object is in a later phase: nothing of the pass may be written.
				Phases: []desired.Phase{{Name: "one", Objects: tc.objects[:1]}, {Name: "two", Objects: tc.objects[1:]}}}
			res, err := engine.Apply(t.Context(), req)
			tc.check(t, err)
			assert.Zero(t, res.Created, "nothing is applied")
			_, ok := get(t, e.mgmt, first)
			assert.False(t, ok, "not even the objects of the earlier phase")
			_, ok = get(t, e.mgmt, binding)
			assert.False(t, ok, "nothing cluster-scoped is created")
		})
	}

	// Within the namespace, a confined pass applies as usual; hosted phases are not confined.
	hostedRole := e.obj(t, "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: placeholder}\nrules: []\n")
	hostedRole.SetName(e.ns + "-hosted")
	req := apply.Request{Owner: e.owner, Targets: e.targets, DefaultNamespace: e.ns, Confine: map[string]string{"": e.ns},
		Phases: []desired.Phase{
			{Name: "one", Objects: []*unstructured.Unstructured{first}},
			{Name: "two", Class: "hosted-cluster", Objects: []*unstructured.Unstructured{hostedRole}},
		}}
	applyUntilComplete(t, engine, req)
	_, ok := get(t, e.mgmt, first)
	assert.True(t, ok)
	_, ok = get(t, e.hosted, hostedRole)
	assert.True(t, ok)
}
