package schema

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"
)

func object(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(y))
	require.NoError(t, err)
	// Integers as int64, as render decodes objects.
	var m map[string]any
	require.NoError(t, utiljson.Unmarshal(js, &m))
	return &unstructured.Unstructured{Object: m}
}

const widgetCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            properties:
              size: {type: integer, minimum: 1}
              color: {type: string, enum: [red, blue]}
            x-kubernetes-validations:
            - {rule: "self.size <= 10", message: "size is at most 10"}
`

const deployment = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: team, labels: {app: web}}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      restartPolicy: Always
      containers:
      - name: web
        image: registry.k8s.io/pause:3.10
        imagePullPolicy: IfNotPresent
        ports: [{containerPort: 80, protocol: TCP}]
`

func TestCheckValidObjects(t *testing.T) {
	t.Parallel()
	c := New(object(t, widgetCRD))
	for name, y := range map[string]string{
		"deployment": deployment,
		"service": `
apiVersion: v1
kind: Service
metadata: {name: web, namespace: team}
spec:
  type: ClusterIP
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080, protocol: TCP}]
`,
		"configmap": `
apiVersion: v1
kind: ConfigMap
metadata: {name: web.config, namespace: team, annotations: {example.com/note: "x"}}
data: {k: "1", app.yaml: "a: b"}
`,
		"secret":    `{apiVersion: v1, kind: Secret, metadata: {name: s}, data: {k: aGVsbG8=}, stringData: {p: x}}`,
		"rbac name": `{apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole, metadata: {name: "system:example"}, rules: []}`,
		"cronjob": `
apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly}
spec:
  schedule: "0 0 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers: [{name: job, image: "busybox@sha256:0000000000000000000000000000000000000000000000000000000000000000"}]
`,
		"crd":             widgetCRD,
		"custom resource": `{apiVersion: example.com/v1, kind: Widget, metadata: {name: w, namespace: team, creationTimestamp: null}, spec: {size: 3, color: red}, status: {}}`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			problems, known := c.Check(object(t, y))
			assert.Empty(t, problems)
			assert.True(t, known)
		})
	}
}

func TestCheckUnknownKindIsNotChecked(t *testing.T) {
	t.Parallel()
	problems, known := New().Check(object(t, `{apiVersion: example.com/v1, kind: Widget, metadata: {name: w}, spec: {anything: 1}}`))
	assert.Empty(t, problems)
	assert.False(t, known)

	// Its metadata is every object's, and checked all the same.
	problems, known = New().Check(object(t, `{apiVersion: example.com/v1, kind: Widget, metadata: {name: w, namespace: Also_Bad}}`))
	assert.False(t, known)
	assertProblem(t, problems, "metadata.namespace", "lower case")
}

// The API machinery's name rules hold for every object, whatever its kind: the name a DNS-1123
// subdomain (custom resources' rule) for a kind the checker has no schema for, a kind of a
// built-in group it does not have, and a custom resource; the namespace a DNS-1123 label; label
// values valid.
func TestCheckNamesOfEveryKind(t *testing.T) {
	t.Parallel()
	c := New(object(t, widgetCRD))
	for _, y := range []string{
		`{apiVersion: example.com/v2, kind: Gadget, metadata: {name: Bad_Name, namespace: Also_Bad, labels: {app: "not valid"}}}`,
		`{apiVersion: route.openshift.io/v1, kind: Route, metadata: {name: Bad_Name, namespace: Also_Bad, labels: {app: "not valid"}}}`,
		`{apiVersion: apps/v1, kind: Deploymnet, metadata: {name: Bad_Name, namespace: Also_Bad, labels: {app: "not valid"}}}`,
		`{apiVersion: example.com/v1, kind: Widget, metadata: {name: Bad_Name, namespace: Also_Bad, labels: {app: "not valid"}}, spec: {size: 1}}`,
	} {
		problems, _ := c.Check(object(t, y))
		assertProblem(t, problems, "metadata.name", `"Bad_Name": a lowercase RFC 1123 subdomain`)
		assertProblem(t, problems, "metadata.namespace", `"Also_Bad"`)
		assertProblem(t, problems, "metadata.labels", `"not valid"`)
		names := 0
		for _, p := range problems {
			if p.Field == "metadata.name" {
				names++
			}
		}
		assert.Equal(t, 1, names, "the name reported once: %v", problems)
	}
	problems, known := c.Check(object(t, `{apiVersion: example.com/v2, kind: Gadget, metadata: {name: ok.name}}`))
	assert.Empty(t, problems)
	assert.False(t, known)
}

func TestCheckProblems(t *testing.T) {
	t.Parallel()
	c := New(object(t, widgetCRD))
	podTemplate := func(container string) string {
		return `{apiVersion: apps/v1, kind: Deployment, metadata: {name: web}, spec: {selector: {matchLabels: {a: b}},
template: {metadata: {labels: {a: b}}, spec: {containers: [` + container + `]}}}}`
	}
	for _, tc := range []struct {
		name, object, field, detail string
	}{
		{"kind typo", `{apiVersion: apps/v1, kind: Deploymnet, metadata: {name: web}}`, "kind", "Deploymnet is not a kind of apps/v1; did you mean Deployment?"},
		{"unknown version", `{apiVersion: apps/v1beta9, kind: Deployment, metadata: {name: web}}`, "apiVersion", "apps/v1beta9"},
		{"unknown field", `{apiVersion: apps/v1, kind: Deployment, metadata: {name: web}, spec: {replica: 3}}`, "spec.replica", "unknown field: apps/v1 Deployment in Kubernetes 1.36 has no such field; did you mean replicas?"},
		{"wrong type", `{apiVersion: apps/v1, kind: Deployment, metadata: {name: web}, spec: {replicas: "3"}}`, "spec.replicas", "must be a number"},
		{"configmap number", `{apiVersion: v1, kind: ConfigMap, metadata: {name: c}, data: {k: 1}}`, "data.k", "must be a string, not 1"},
		{"pull policy", podTemplate(`{name: a, image: nginx, imagePullPolicy: Allways}`), "spec.template.spec.containers[0].imagePullPolicy", `"Allways": must be one of Always, IfNotPresent, Never`},
		{"protocol", podTemplate(`{name: a, image: nginx, ports: [{containerPort: 80, protocol: tcp}]}`), "spec.template.spec.containers[0].ports[0].protocol", "must be one of SCTP, TCP, UDP"},
		{"restart policy", `{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {restartPolicy: Sometimes, containers: [{name: a, image: nginx}]}}`, "spec.restartPolicy", "must be one of Always, Never, OnFailure"},
		{"service type", `{apiVersion: v1, kind: Service, metadata: {name: s}, spec: {type: Loadbalancer, ports: [{port: 80}]}}`, "spec.type", "must be one of ClusterIP, ExternalName, LoadBalancer, NodePort"},
		{"bad image", podTemplate(`{name: a, image: "registry.k8s.io/pause::3.10"}`), "spec.template.spec.containers[0].image", "not an image reference"},
		{"init container image", `{apiVersion: batch/v1, kind: Job, metadata: {name: j}, spec: {template: {spec: {restartPolicy: Never, initContainers: [{name: i, image: "UPPER/case"}], containers: [{name: a, image: nginx}]}}}}`, "spec.template.spec.initContainers[0].image", "not an image reference"},
		{"name", `{apiVersion: v1, kind: ConfigMap, metadata: {name: Bad_Name}}`, "metadata.name", "lower case"},
		{"namespace name is a label", `{apiVersion: v1, kind: Namespace, metadata: {name: a.b}}`, "metadata.name", "must not contain dots"},
		{"namespace", `{apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: Also_Bad}}`, "metadata.namespace", "lower case"},
		{"label value", `{apiVersion: v1, kind: ConfigMap, metadata: {name: c, labels: {a: "not valid!"}}}`, "metadata.labels", "a valid label must be"},
		{"annotation key", `{apiVersion: v1, kind: ConfigMap, metadata: {name: c, annotations: {"bad key": x}}}`, "metadata.annotations", "name part must consist of"},
		{"configmap size", `{apiVersion: v1, kind: ConfigMap, metadata: {name: c}, data: {k: "` + strings.Repeat("x", 1<<20) + `"}}`, "data", "1048576"},
		{"secret base64", `{apiVersion: v1, kind: Secret, metadata: {name: s}, data: {k: "not base64!"}}`, "data.k", "base64"},
		{"object size", `{apiVersion: v1, kind: ConfigMap, metadata: {name: c, annotations: {a: "` + strings.Repeat("x", 200<<10) + `"}}, binaryData: {b: "` + strings.Repeat("A", 1600<<10) + `"}}`, "", "1572864"},
		{"required", `{apiVersion: apps/v1, kind: Deployment, metadata: {name: web}, spec: {template: {spec: {containers: [{name: a, image: nginx}]}}}}`, "spec.selector", "required"},
		{"no containers", `{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: []}}`, "spec.containers", "at least one container"},
		{"selector", `{apiVersion: apps/v1, kind: DaemonSet, metadata: {name: d}, spec: {selector: {matchLabels: {app: d}}, template: {metadata: {labels: {app: e}}, spec: {containers: [{name: a, image: nginx}]}}}}`, "spec.template.metadata.labels", "the selector does not match"},
		{"container name", podTemplate(`{image: nginx}`), "spec.template.spec.containers[0].name", "required"},
		{"container image", podTemplate(`{name: a}`), "spec.template.spec.containers[0].image", "required"},
		{"custom resource unknown field", `{apiVersion: example.com/v1, kind: Widget, metadata: {name: w}, spec: {size: 1, colour: red}}`, "spec.colour", "unknown field"},
		{"custom resource enum", `{apiVersion: example.com/v1, kind: Widget, metadata: {name: w}, spec: {size: 1, color: green}}`, "spec.color", "supported values"},
		{"custom resource required", `{apiVersion: example.com/v1, kind: Widget, metadata: {name: w}, spec: {}}`, "spec.size", "Required"},
		{"custom resource rule", `{apiVersion: example.com/v1, kind: Widget, metadata: {name: w}, spec: {size: 11}}`, "spec", "size is at most 10"},
		{"custom resource version", `{apiVersion: example.com/v2, kind: Widget, metadata: {name: w}, spec: {size: 1}}`, "apiVersion", "serves v1"},
		{"custom resource metadata", `{apiVersion: example.com/v1, kind: Widget, metadata: {name: w, lables: {a: b}}, spec: {size: 1}}`, "metadata.lables", "did you mean labels?"},
		{"crd", `{apiVersion: apiextensions.k8s.io/v1, kind: CustomResourceDefinition, metadata: {name: wrong}, spec: {group: example.com, scope: Namespaced, names: {plural: gadgets, kind: Gadget}, versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]}}`, "metadata.name", "spec.names.plural+\".\"+spec.group"},
		{"crd unknown field", `{apiVersion: apiextensions.k8s.io/v1, kind: CustomResourceDefinition, metadata: {name: gadgets.example.com}, spec: {group: example.com, scope: Namespaced, nmes: {}}}`, "spec.nmes", "unknown field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			problems, known := c.Check(object(t, tc.object))
			assert.True(t, known)
			assertProblem(t, problems, tc.field, tc.detail)
		})
	}
}

// assertProblem asserts that problems hold one of field whose detail contains detail.
func assertProblem(t *testing.T, problems []Problem, field, detail string) {
	t.Helper()
	for _, p := range problems {
		if p.Field == field && strings.Contains(p.Detail, detail) {
			return
		}
	}
	assert.Failf(t, "problem not found", "want %s: ...%s...; got %v", field, detail, problems)
}

func TestCheckDoesNotChangeTheObject(t *testing.T) {
	t.Parallel()
	c := New(object(t, widgetCRD))
	for _, y := range []string{deployment, `{apiVersion: example.com/v1, kind: Widget, metadata: {name: w}, spec: {size: 1, colour: red}}`} {
		obj := object(t, y)
		before := obj.DeepCopy()
		c.Check(obj)
		assert.Equal(t, before, obj)
	}
}

// structured-merge-diff stops reading a mapping at its first unknown field: every problem is
// reported all the same, every time.
func TestCheckReportsEveryProblemOfAMapping(t *testing.T) {
	t.Parallel()
	c := New()
	obj := object(t, `{apiVersion: apps/v1, kind: Deployment, metadata: {name: web}, spec: {replica: 3, replicas: "2", paused: "no", selectr: {}, selector: {matchLabels: {a: b}},
template: {metadata: {labels: {a: b}}, spec: {containers: [{name: web, image: nginx, imagePullPolice: Always, ports: [{containerPort: 80, hostPorts: 1, protocol: TCP}]}]}}}}`)
	want := []Problem{
		{"spec.paused", `must be a boolean, not a string ("no")`},
		{"spec.replica", "unknown field: apps/v1 Deployment in Kubernetes 1.36 has no such field; did you mean replicas?"},
		{"spec.replicas", `must be a number, not a string ("2")`},
		{"spec.selectr", "unknown field: apps/v1 Deployment in Kubernetes 1.36 has no such field; did you mean selector?"},
		{`spec.template.spec.containers[name="web"].imagePullPolice`, "unknown field: apps/v1 Deployment in Kubernetes 1.36 has no such field; did you mean imagePullPolicy?"},
		{`spec.template.spec.containers[name="web"].ports[containerPort=80,protocol="TCP"].hostPorts`, "unknown field: apps/v1 Deployment in Kubernetes 1.36 has no such field; did you mean hostPort?"},
	}
	for range 5 {
		problems, _ := c.Check(obj)
		assert.Equal(t, want, problems)
	}
}
