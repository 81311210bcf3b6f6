package schema

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// enum is a string field and the values the API server accepts in it.
type enum struct {
	// path of the field, as eachField reads it.
	path string
	// values accepted, sorted.
	values []string
}

// The enums below are the ones the API server's validation enforces and the built-in schema
// does not carry: client-go's OpenAPI models declare these fields plain strings, and the lists
// live in k8s.io/kubernetes/pkg/apis/*/validation, which is not importable. Kept by hand, short
// on purpose: the fields package authors write, whose typos the cluster would refuse.
var (
	podEnums = []enum{
		{"restartPolicy", []string{"Always", "Never", "OnFailure"}},
		{"dnsPolicy", []string{"ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"}},
		{"preemptionPolicy", []string{"Never", "PreemptLowerPriority"}},
		{"tolerations[].operator", []string{"Equal", "Exists"}},
		{"tolerations[].effect", []string{"NoExecute", "NoSchedule", "PreferNoSchedule"}},
	}
	containerEnums = []enum{
		{"imagePullPolicy", []string{"Always", "IfNotPresent", "Never"}},
		{"terminationMessagePolicy", []string{"FallbackToLogsOnError", "File"}},
		{"ports[].protocol", protocols},
	}
	protocols = []string{"SCTP", "TCP", "UDP"}
	kindEnums = map[schema.GroupKind][]enum{
		{Kind: "Service"}: {
			{"spec.type", []string{"ClusterIP", "ExternalName", "LoadBalancer", "NodePort"}},
			{"spec.ports[].protocol", protocols},
			{"spec.sessionAffinity", []string{"ClientIP", "None"}},
			{"spec.externalTrafficPolicy", []string{"Cluster", "Local"}},
			{"spec.internalTrafficPolicy", []string{"Cluster", "Local"}},
			{"spec.ipFamilyPolicy", []string{"PreferDualStack", "RequireDualStack", "SingleStack"}},
			{"spec.ipFamilies[]", []string{"IPv4", "IPv6"}},
		},
		{Kind: "PersistentVolumeClaim"}: {
			{"spec.accessModes[]", []string{"ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"}},
			{"spec.volumeMode", []string{"Block", "Filesystem"}},
		},
		{Group: "apps", Kind: "Deployment"}: {{"spec.strategy.type", []string{"Recreate", "RollingUpdate"}}},
		{Group: "apps", Kind: "DaemonSet"}:  {{"spec.updateStrategy.type", []string{"OnDelete", "RollingUpdate"}}},
		{Group: "apps", Kind: "StatefulSet"}: {
			{"spec.podManagementPolicy", []string{"OrderedReady", "Parallel"}},
			{"spec.updateStrategy.type", []string{"OnDelete", "RollingUpdate"}},
		},
		{Group: "batch", Kind: "Job"}:     {{"spec.completionMode", []string{"Indexed", "NonIndexed"}}},
		{Group: "batch", Kind: "CronJob"}: {{"spec.concurrencyPolicy", []string{"Allow", "Forbid", "Replace"}}},
	}
)

// checkEnums checks the enums of obj's kind and of the pod spec it holds, if any.
func checkEnums(obj *unstructured.Unstructured) []Problem {
	gk := obj.GroupVersionKind().GroupKind()
	var problems []Problem
	for _, e := range kindEnums[gk] {
		problems = append(problems, e.check(obj.Object, "")...)
	}
	if spec, ok := podSpecPaths[gk]; ok {
		eachField(obj.Object, "", spec, func(field string, v any) {
			for _, e := range podEnums {
				problems = append(problems, e.check(v, field)...)
			}
		})
	}
	eachContainer(obj, func(field string, c map[string]any) {
		for _, e := range containerEnums {
			problems = append(problems, e.check(c, field)...)
		}
	})
	return problems
}

// check checks the field in v, whose path is prefix. An empty value is left alone: the API
// server defaults it or says it is required, and the typed check reports one that is not a
// string.
func (e enum) check(v any, prefix string) []Problem {
	var problems []Problem
	eachField(v, prefix, e.path, func(field string, value any) {
		s, ok := value.(string)
		if !ok || s == "" || slices.Contains(e.values, s) {
			return
		}
		detail := fmt.Sprintf("%q: must be one of %s", s, strings.Join(e.values, ", "))
		if n := Nearest(s, e.values); n != "" {
			detail += fmt.Sprintf("; did you mean %s?", n)
		}
		problems = append(problems, Problem{Field: field, Detail: detail})
	})
	return problems
}
