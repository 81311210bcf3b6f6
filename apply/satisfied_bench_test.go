package apply

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// BenchmarkSatisfied compares a desired object with its live copy, which the API server has
// filled with defaults, managed fields and status: the check that lets an unchanged object cost
// one GET and no write.
func BenchmarkSatisfied(b *testing.B) {
	configMap := `apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: team
  labels: {app.kubernetes.io/name: demo, app.kubernetes.io/version: "1.0.0"}
  annotations: {pkgsync.dev/phase: deploy}
data:
  a: "1"
  b: "2"
  payload: "` + fmt.Sprintf("%0512d", 0) + `"
`
	deployment := `apiVersion: apps/v1
kind: Deployment
metadata:
  name: operator
  namespace: team
  labels: {app.kubernetes.io/name: demo}
  annotations: {pkgsync.dev/phase: deploy}
spec:
  replicas: 2
  selector:
    matchLabels: {app.kubernetes.io/name: demo}
  template:
    metadata:
      labels: {app.kubernetes.io/name: demo}
    spec:
      serviceAccountName: operator
      containers:
      - name: operator
        image: registry.k8s.io/pause:3.10
        args: [--log-level=info, --leader-elect]
        ports: [{containerPort: 8080, name: metrics}]
        resources: {requests: {cpu: 10m, memory: 32Mi}}
`
	// What the API server adds to a Deployment: defaults, bookkeeping and status.
	serverFields := `metadata:
  uid: 0b7b0b0e-1a1a-4c4c-8d8d-000000000000
  resourceVersion: "12345"
  generation: 3
  creationTimestamp: "2026-01-01T00:00:00Z"
  managedFields:
  - manager: pkgsync
    operation: Apply
    apiVersion: apps/v1
    fieldsType: FieldsV1
    fieldsV1: {f:spec: {f:replicas: {}, f:template: {f:spec: {f:containers: {'k:{"name":"operator"}': {.: {}, f:image: {}}}}}}}
spec:
  progressDeadlineSeconds: 600
  revisionHistoryLimit: 10
  strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 25%, maxUnavailable: 25%}}
  template:
    spec:
      restartPolicy: Always
      dnsPolicy: ClusterFirst
      schedulerName: default-scheduler
      terminationGracePeriodSeconds: 30
      securityContext: {}
      containers:
      - name: operator
        imagePullPolicy: IfNotPresent
        terminationMessagePath: /dev/termination-log
        terminationMessagePolicy: File
status:
  observedGeneration: 3
  replicas: 2
  readyReplicas: 2
  availableReplicas: 2
  updatedReplicas: 2
  conditions:
  - {type: Available, status: "True", reason: MinimumReplicasAvailable}
  - {type: Progressing, status: "True", reason: NewReplicaSetAvailable}
`
	cases := []struct {
		name    string
		desired string
		extra   string
		change  func(*unstructured.Unstructured)
		want    bool
	}{
		{"configmap/unchanged", configMap, "", nil, true},
		{"deployment/unchanged", deployment, serverFields, nil, true},
		{"deployment/changed", deployment, serverFields, func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, int64(3), "spec", "replicas")
		}, false},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			desired := parseObject(b, c.desired)
			live := parseObject(b, c.desired)
			if c.extra != "" {
				merge(live.Object, parseObject(b, c.extra).Object)
			}
			if c.change != nil {
				c.change(desired)
			}
			if got := satisfied(desired, live); got != c.want {
				b.Fatalf("satisfied = %v, want %v", got, c.want)
			}
			b.ReportAllocs()
			for b.Loop() {
				satisfied(desired, live)
			}
		})
	}
}

func parseObject(b *testing.B, s string) *unstructured.Unstructured {
	b.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(s), &u.Object); err != nil {
		b.Fatal(err)
	}
	return u
}

// merge adds src into dst: maps recursively, list elements by position.
func merge(dst, src map[string]any) {
	for k, sv := range src {
		dv, ok := dst[k]
		if !ok {
			dst[k] = sv
			continue
		}
		switch s := sv.(type) {
		case map[string]any:
			if d, ok := dv.(map[string]any); ok {
				merge(d, s)
			}
		case []any:
			if d, ok := dv.([]any); ok && len(d) == len(s) {
				for i := range s {
					if dm, ok := d[i].(map[string]any); ok {
						if sm, ok := s[i].(map[string]any); ok {
							merge(dm, sm)
						}
					}
				}
			}
		}
	}
}
