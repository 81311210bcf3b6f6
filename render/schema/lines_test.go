package schema

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// Every problem the checker reports of an object has the line of its own field in the object's
// document: the paths the checks write (structured-merge-diff's, apimachinery's, the tables')
// all resolve.
func TestFieldLineOfEveryProblem(t *testing.T) {
	t.Parallel()
	const doc = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: Bad_Name
  namespace: Also_Bad
  labels: {app: "not valid"}
spec:
  replica: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: sidecar
        image: registry.k8s.io/pause:3.10
      - name: web
        image: registry.k8s.io/pause::3.10
        imagePullPolicy: Allways
        ports:
        - containerPort: 80
          protocoll: TCP
`
	var root yaml.Node
	require.NoError(t, yaml.Unmarshal([]byte(doc), &root))
	problems, known := New().Check(object(t, doc))
	require.True(t, known)
	want := map[string]int{
		"metadata.name":      4,
		"metadata.namespace": 5,
		"metadata.labels":    6,
		"spec.replica":       8,
		`spec.template.spec.containers[name="web"].ports[containerPort=80,protocol="TCP"].protocoll`: 21,
		"spec.template.spec.containers[1].image":                                                     17,
		"spec.template.spec.containers[1].imagePullPolicy":                                           18,
	}
	got := map[string]int{}
	for _, p := range problems {
		got[p.Field] = FieldLine(&root, p.Field)
	}
	assert.Equal(t, want, got, "%v", problems)
}

func TestFieldLine(t *testing.T) {
	t.Parallel()
	const doc = `# a comment
metadata:
  name: x
  annotations:
    example.com/a.b: "1"
data:
  app.properties: |
    a=b
  k: v
base: &base
  size: 1
alias: *base
list:
- a
- b
`
	var root yaml.Node
	require.NoError(t, yaml.Unmarshal([]byte(doc), &root))
	tests := []struct {
		path string
		want int
	}{
		{"metadata.name", 3},
		{".metadata.name", 3},
		{"metadata.annotations.example.com/a.b", 5},
		{"metadata.annotations[example.com/a.b]", 5},
		{"data.app.properties", 7},
		{"data.k", 9},
		{"alias.size", 11},
		{"list[1]", 15},
		{`list[="b"]`, 15},
		{"list[2]", 13},
		{"metadata.labels", 2},
		{"metadata.name.deeper", 3},
		{"spec.replicas", 0},
		{"", 0},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, FieldLine(&root, tt.path), tt.path)
	}
	assert.Zero(t, FieldLine(nil, "metadata.name"))
	assert.Zero(t, FieldLine(&yaml.Node{Kind: yaml.DocumentNode}, "metadata.name"))
}
