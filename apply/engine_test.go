package apply_test

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/desired"
)

const deploymentYAML = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: NS
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: registry.example/web:1
        ports:
        - containerPort: 8080
`

func TestLaterPhaseWaitsForAvailability(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	engine := apply.NewEngine(apply.Options{})
	cm := e.configMap(t, "settings", map[string]string{"a": "1"})
	req := apply.Request{
		Owner: e.owner,
		Phases: []desired.Phase{
			{Name: "deploy", Objects: []*unstructured.Unstructured{e.obj(t, deploymentYAML)}},
			{Name: "configure", Objects: []*unstructured.Unstructured{cm}},
		},
		Probes: []v1alpha1.AvailabilityProbe{{
			Selector: v1alpha1.ProbeSelector{Kind: &v1alpha1.GroupKindSelector{Group: "apps", Kind: "Deployment"}},
			Probes:   []v1alpha1.Probe{{FieldsEqual: &v1alpha1.FieldsEqualProbe{FieldA: ".spec.replicas", FieldB: ".status.updatedReplicas"}}},
		}},
		Targets: e.targets,
	}

	res, err := engine.Apply(t.Context(), req)
	require.NoError(t, err)
	assert.False(t, res.Complete())
	require.Len(t, res.Phases, 2)
	assert.Equal(t, v1alpha1.PhaseProgressing, res.Phases[0].State)
	assert.Equal(t, v1alpha1.PhasePending, res.Phases[1].State)
	require.NotEmpty(t, res.Phases[0].NotAvailable)
	assert.Equal(t, "web", res.Phases[0].NotAvailable[0].Ref.Name)
	assert.Contains(t, res.Summary(), "kstatus InProgress")
	assert.Contains(t, res.Summary(), "probe: .status.updatedReplicas not set")
	_, ok := get(t, e.mgmt, cm)
	assert.False(t, ok, "the second phase must not be applied while the Deployment is unavailable")

	setDeploymentAvailable(t, e.mgmt, e.ns, "web")
	req.Previous = res.Inventory
	res, err = engine.Apply(t.Context(), req)
	require.NoError(t, err)
	assert.True(t, res.Complete(), res.Summary())
	_, ok = get(t, e.mgmt, cm)
	assert.True(t, ok)
	assert.Equal(t, 2, res.Inventory.Len())

	live, _ := get(t, e.mgmt, cm)
	assert.Equal(t, map[string]string{
		apply.LabelOwnerKind: "Package", apply.LabelOwnerNamespace: e.ns, apply.LabelOwnerName: "pkg",
	}, live.GetLabels())
}

func TestCRDAndCustomResourceInOnePhase(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	group := e.ns + ".example.com"
	crd := e.obj(t, fmt.Sprintf(`
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.%[1]s
spec:
  group: %[1]s
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`, group))
	widget := e.obj(t, fmt.Sprintf(`
apiVersion: %s/v1
kind: Widget
metadata: {name: w, namespace: NS}
spec: {size: 3}
`, group))
	// The custom resource comes first in the rendered order: the engine must still apply the CRD first.
	req := apply.Request{Owner: e.owner, Targets: e.targets, Phases: []desired.Phase{{Name: "all", Objects: []*unstructured.Unstructured{widget, crd}}}}
	res := applyUntilComplete(t, apply.NewEngine(apply.Options{}), req)
	live, ok := get(t, e.mgmt, widget)
	require.True(t, ok)
	size, _, _ := unstructured.NestedInt64(live.Object, "spec", "size")
	assert.Equal(t, int64(3), size)
	assert.Equal(t, 2, res.Inventory.Len())
}

func TestHostedClassPhaseGoesToTheHostedCluster(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	inHosted := e.configMap(t, "rbac", map[string]string{"x": "y"})
	inMgmt := e.configMap(t, "operator", map[string]string{"x": "y"})
	req := apply.Request{Owner: e.owner, Targets: e.targets, Phases: []desired.Phase{
		{Name: "rbac", Class: v1alpha1.ClassHostedCluster, Objects: []*unstructured.Unstructured{inHosted}},
		{Name: "deploy", Objects: []*unstructured.Unstructured{inMgmt}},
	}}
	res := applyUntilComplete(t, apply.NewEngine(apply.Options{}), req)

	_, ok := get(t, e.hosted, inHosted)
	assert.True(t, ok)
	_, ok = get(t, e.mgmt, inHosted)
	assert.False(t, ok)
	_, ok = get(t, e.mgmt, inMgmt)
	assert.True(t, ok)
	assert.Equal(t, "hosted cluster "+e.ns, res.Phases[0].Target)
	require.Len(t, res.Inventory.Phases, 2)
	assert.Equal(t, v1alpha1.ClassHostedCluster, res.Inventory.Phases[0].Class)

	t.Run("without a hosted target", func(t *testing.T) {
		req := req
		req.Targets = map[string]apply.Target{"": e.targets[""]}
		req.Previous = res.Inventory
		res, err := apply.NewEngine(apply.Options{}).Apply(t.Context(), req)
		var unavailable *apply.TargetUnavailableError
		require.ErrorAs(t, err, &unavailable)
		assert.Equal(t, v1alpha1.ClassHostedCluster, unavailable.Class)
		assert.Equal(t, v1alpha1.PhasePending, res.Phases[1].State)
		assert.Equal(t, 2, res.Inventory.Len(), "nothing may be lost from the inventory")
	})
}

func TestDriftIsRestored(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	engine := apply.NewEngine(apply.Options{})
	cm := e.configMap(t, "settings", map[string]string{"mode": "safe"})
	req := apply.Request{Owner: e.owner, Targets: e.targets, Phases: []desired.Phase{{Name: "one", Objects: []*unstructured.Unstructured{cm}}}}
	res := applyUntilComplete(t, engine, req)
	req.Previous = res.Inventory

	// An imperative edit, as kubectl edit makes it.
	live, _ := get(t, e.mgmt, cm)
	require.NoError(t, unstructured.SetNestedField(live.Object, "unsafe", "data", "mode"))
	require.NoError(t, e.mgmt.Update(t.Context(), live, client.FieldOwner("kubectl-edit")))
	res, err := engine.Apply(t.Context(), req)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Updated)
	live, _ = get(t, e.mgmt, cm)
	assert.Equal(t, "safe", live.Object["data"].(map[string]any)["mode"])

	require.NoError(t, e.mgmt.Delete(t.Context(), live))
	res, err = engine.Apply(t.Context(), req)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Created)
	_, ok := get(t, e.mgmt, cm)
	assert.True(t, ok)
}

func TestCollisionIsRefusedAndAdoptionAllowed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	engine := apply.NewEngine(apply.Options{})
	foreign := e.configMap(t, "foreign", map[string]string{"owner": "someone"})
	require.NoError(t, e.mgmt.Create(t.Context(), foreign.DeepCopy()))
	other := e.configMap(t, "other", map[string]string{"owner": "other package"})
	other.SetLabels(map[string]string{apply.LabelOwnerKind: "Package", apply.LabelOwnerNamespace: e.ns, apply.LabelOwnerName: "other"})
	require.NoError(t, e.mgmt.Create(t.Context(), other.DeepCopy()))

	objs := []*unstructured.Unstructured{
		e.configMap(t, "foreign", map[string]string{"owner": "pkgsync"}),
		e.configMap(t, "other", map[string]string{"owner": "pkgsync"}),
	}
	req := apply.Request{Owner: e.owner, Targets: e.targets, Phases: []desired.Phase{{Name: "one", Objects: objs}}}
	res, err := engine.Apply(t.Context(), req)
	var collision *apply.CollisionError
	require.ErrorAs(t, err, &collision)
	assert.ErrorContains(t, err, "ConfigMap "+e.ns+"/foreign on management cluster exists and is not managed by pkgsync")
	assert.ErrorContains(t, err, "is owned by Package "+e.ns+"/other")
	assert.False(t, res.Complete())
	assert.Zero(t, res.Inventory.Len(), "objects that are not ours are not tracked")
	live, _ := get(t, e.mgmt, foreign)
	assert.Equal(t, "someone", live.Object["data"].(map[string]any)["owner"], "a collision must not touch the object")

	req.Adopt = v1alpha1.AdoptAlways
	res, err = engine.Apply(t.Context(), req)
	require.NoError(t, err)
	assert.True(t, res.Complete())
	live, _ = get(t, e.mgmt, foreign)
	assert.Equal(t, "pkgsync", live.Object["data"].(map[string]any)["owner"])
	assert.Equal(t, "pkg", live.GetLabels()[apply.LabelOwnerName])
}

func TestConflictWithAnotherFieldManagerIsReported(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	engine := apply.NewEngine(apply.Options{})
	cm := e.configMap(t, "settings", map[string]string{"mode": "safe"})
	req := apply.Request{Owner: e.owner, Targets: e.targets, Phases: []desired.Phase{{Name: "one", Objects: []*unstructured.Unstructured{cm}}}}
	res := applyUntilComplete(t, engine, req)
	req.Previous = res.Inventory

	// Another declarative applier claims the field.
	claim := e.configMap(t, "settings", map[string]string{"mode": "fast"})
	require.NoError(t, e.mgmt.Apply(t.Context(), client.ApplyConfigurationFromUnstructured(claim), client.FieldOwner("tuning-operator"), client.ForceOwnership))

	_, err := engine.Apply(t.Context(), req)
	var conflict *apply.ConflictError
	require.ErrorAs(t, err, &conflict)
	assert.Equal(t, []string{"tuning-operator"}, conflict.Managers)
	assert.Equal(t, []string{".data.mode"}, conflict.Fields)
	assert.ErrorContains(t, err, `owned by field manager "tuning-operator"`)
	live, _ := get(t, e.mgmt, cm)
	assert.Equal(t, "fast", live.Object["data"].(map[string]any)["mode"], "pkgsync must not steal the field")
}

func TestImmutableFieldChange(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	engine := apply.NewEngine(apply.Options{})
	job := func(image string, recreate bool) *unstructured.Unstructured {
		u := e.obj(t, fmt.Sprintf(`
apiVersion: batch/v1
kind: Job
metadata: {name: migrate, namespace: NS}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: migrate, image: %q}
`, image))
		if recreate {
			u.SetAnnotations(map[string]string{apply.RecreateAnnotation: "true"})
		}
		return u
	}
	req := func(obj *unstructured.Unstructured) apply.Request {
		return apply.Request{Owner: e.owner, Targets: e.targets, Phases: []desired.Phase{{Name: "one", Objects: []*unstructured.Unstructured{obj}}}}
	}
	_, err := engine.Apply(t.Context(), req(job("migrate:1", false)))
	require.NoError(t, err)

	_, err = engine.Apply(t.Context(), req(job("migrate:2", false)))
	var immutable *apply.ImmutableFieldError
	require.ErrorAs(t, err, &immutable)
	assert.ErrorContains(t, err, "Job.batch "+e.ns+"/migrate on management cluster: an immutable field changed")
	assert.ErrorContains(t, err, apply.RecreateAnnotation)

	// Opting in: the first pass deletes, a later one creates the new Job.
	// The condition runs in another goroutine: nothing in it reports to t (get and e.obj do).
	recreate, like := req(job("migrate:2", true)), job("", false)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, err := engine.Apply(t.Context(), recreate)
		assert.NoError(c, err)
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(like.GroupVersionKind())
		if !assert.NoError(c, e.mgmt.Get(t.Context(), client.ObjectKeyFromObject(like), live)) {
			return
		}
		containers, _, _ := unstructured.NestedSlice(live.Object, "spec", "template", "spec", "containers")
		assert.Equal(c, "migrate:2", containers[0].(map[string]any)["image"])
	}, eventuallyTimeout, eventuallyInterval)
}

func TestNoOpReconcileSendsNoWrites(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg, counter := countingConfig(management.Config)
	e.targets[""] = apply.Target{Client: newClient(t, cfg), Name: "management cluster"}
	engine := apply.NewEngine(apply.Options{})
	objects := []*unstructured.Unstructured{
		e.obj(t, deploymentYAML),
		e.configMap(t, "settings", map[string]string{"a": "1"}),
		e.obj(t, `
apiVersion: v1
kind: Secret
metadata: {name: creds, namespace: NS}
stringData: {password: hunter2}
`),
		e.obj(t, `
apiVersion: v1
kind: Service
metadata: {name: web, namespace: NS}
spec:
  selector: {app: web}
  ports:
  - {port: 80, targetPort: 8080}
`),
		e.obj(t, `
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: reader, namespace: NS}
rules:
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list]
`),
	}
	req := apply.Request{Owner: e.owner, Targets: e.targets, Phases: []desired.Phase{{Name: "one", Objects: objects}}}
	res, err := engine.Apply(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, len(objects), res.Created)
	setDeploymentAvailable(t, e.mgmt, e.ns, "web")
	req.Previous = res.Inventory

	counter.reset()
	res, err = engine.Apply(t.Context(), req)
	require.NoError(t, err)
	require.True(t, res.Complete(), res.Summary())
	counts := counter.reset()
	assert.Equal(t, len(objects), res.Unchanged)
	assert.LessOrEqual(t, counts[http.MethodGet], len(objects), "at most one read per object")
	for method, n := range counts {
		if method != http.MethodGet {
			assert.Zero(t, n, "no %s requests in a no-op reconcile", method)
		}
	}
}

func TestDryRunChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	engine := apply.NewEngine(apply.Options{})
	existing := e.configMap(t, "existing", map[string]string{"a": "1"})
	res := applyUntilComplete(t, engine, apply.Request{Owner: e.owner, Targets: e.targets, Phases: []desired.Phase{{Name: "one", Objects: []*unstructured.Unstructured{existing}}}})

	changed := e.configMap(t, "existing", map[string]string{"a": "2"})
	added := e.configMap(t, "added", nil)
	same := e.configMap(t, "existing", map[string]string{"a": "1"})
	tests := []struct {
		name string
		obj  *unstructured.Unstructured
		want apply.Action
	}{
		{"changed", changed, apply.ActionConfigured},
		{"added", added, apply.ActionCreated},
		{"unchanged", same, apply.ActionUnchanged},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dres, err := engine.Apply(t.Context(), apply.Request{Owner: e.owner, Targets: e.targets, Previous: res.Inventory, DryRun: true,
				Phases: []desired.Phase{{Name: "one", Objects: []*unstructured.Unstructured{tt.obj}}}})
			require.NoError(t, err)
			require.Len(t, dres.Changes, 1)
			assert.Equal(t, tt.want, dres.Changes[0].Action)
			assert.Equal(t, res.Inventory, dres.Inventory)
		})
	}
	live, _ := get(t, e.mgmt, existing)
	assert.Equal(t, "1", live.Object["data"].(map[string]any)["a"])
	_, ok := get(t, e.mgmt, added)
	assert.False(t, ok)
}

func TestUnreachableTargetIsTyped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := *management.Config
	cfg.Host = "https://127.0.0.1:1" // nothing listens there
	// A mapper that needs no server, so that the client is built and the first request is what
	// finds nobody listening, as when a cluster goes away after its client was made.
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace)
	c, err := client.New(&cfg, client.Options{Mapper: mapper})
	require.NoError(t, err)
	e.targets[""] = apply.Target{Client: c, Name: "management cluster"}
	_, err = apply.NewEngine(apply.Options{}).Apply(t.Context(), apply.Request{Owner: e.owner, Targets: e.targets,
		Phases: []desired.Phase{{Name: "one", Objects: []*unstructured.Unstructured{e.configMap(t, "x", nil)}}}})
	var unavailable *apply.TargetUnavailableError
	require.True(t, errors.As(err, &unavailable), "got %v", err)
	assert.Equal(t, "management cluster", unavailable.Target)
}

func TestDefaultNamespaceAndClusterScopedObjects(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	engine := apply.NewEngine(apply.Options{})
	noNamespace := e.configMap(t, "plain", nil)
	noNamespace.SetNamespace("")
	clusterRole := e.obj(t, `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: placeholder, namespace: written-by-mistake}
rules: []
`)
	clusterRole.SetName(e.ns + "-reader")
	req := apply.Request{Owner: e.owner, Targets: e.targets, DefaultNamespace: e.ns,
		Phases: []desired.Phase{{Name: "one", Objects: []*unstructured.Unstructured{noNamespace, clusterRole}}}}
	res := applyUntilComplete(t, engine, req)
	want := []apply.ObjectRef{
		{Version: "v1", Kind: "ConfigMap", Namespace: e.ns, Name: "plain"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole", Name: e.ns + "-reader"},
	}
	assert.Equal(t, want, res.Inventory.Phases[0].Objects)

	// The next revision keeps both: nothing is pruned, nothing written.
	req.Previous = res.Inventory
	res, err := engine.Apply(t.Context(), req)
	require.NoError(t, err)
	assert.Zero(t, res.Pruned)
	assert.Equal(t, 2, res.Unchanged)
	assert.Equal(t, want, res.Inventory.Phases[0].Objects)
}

func TestRevisionThatOnlyRemovesAFieldIsApplied(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	engine := apply.NewEngine(apply.Options{})
	req := apply.Request{Owner: e.owner, Targets: e.targets,
		Phases: []desired.Phase{{Name: "one", Objects: []*unstructured.Unstructured{e.configMap(t, "settings", map[string]string{"a": "1", "b": "2"})}}}}
	res := applyUntilComplete(t, engine, req)

	req.Previous = res.Inventory
	req.Phases = []desired.Phase{{Name: "one", Objects: []*unstructured.Unstructured{e.configMap(t, "settings", map[string]string{"a": "1"})}}}
	res, err := engine.Apply(t.Context(), req)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Updated)
	live, _ := get(t, e.mgmt, e.configMap(t, "settings", nil))
	assert.Equal(t, map[string]any{"a": "1"}, live.Object["data"])
}
