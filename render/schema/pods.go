package schema

import (
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
)

// podSpecPaths are where the built-in kinds that hold pods keep the pod's spec.
var podSpecPaths = map[schema.GroupKind]string{
	{Kind: "Pod"}:                        "spec",
	{Kind: "PodTemplate"}:                "template.spec",
	{Kind: "ReplicationController"}:      "spec.template.spec",
	{Group: "apps", Kind: "Deployment"}:  "spec.template.spec",
	{Group: "apps", Kind: "ReplicaSet"}:  "spec.template.spec",
	{Group: "apps", Kind: "StatefulSet"}: "spec.template.spec",
	{Group: "apps", Kind: "DaemonSet"}:   "spec.template.spec",
	{Group: "batch", Kind: "Job"}:        "spec.template.spec",
	{Group: "batch", Kind: "CronJob"}:    "spec.jobTemplate.spec.template.spec",
}

// containerLists are the lists of containers of a pod's spec.
var containerLists = []string{"initContainers", "containers", "ephemeralContainers"}

// eachContainer calls fn with every container of obj's pod spec, if its kind holds one.
func eachContainer(obj *unstructured.Unstructured, fn func(field string, c map[string]any)) {
	spec, ok := podSpecPaths[obj.GroupVersionKind().GroupKind()]
	if !ok {
		return
	}
	for _, list := range containerLists {
		eachField(obj.Object, "", spec+"."+list+"[]", func(field string, v any) {
			if c, ok := v.(map[string]any); ok {
				fn(field, c)
			}
		})
	}
}

// checkImages checks every container's name and image. The API server requires both, and a
// name that is a DNS-1123 label; it takes any image, but the kubelet refuses one that is not a
// reference (InvalidImageName), so it is parsed here as go-containerregistry parses it. A
// blank image (" ") is left alone: OpenShift's image triggers fill it in.
func checkImages(obj *unstructured.Unstructured) []Problem {
	var problems []Problem
	eachContainer(obj, func(field string, c map[string]any) {
		if n, _ := c["name"].(string); n == "" {
			problems = append(problems, Problem{Field: field + ".name", Detail: "required: every container needs a name"})
		} else {
			for _, msg := range validation.IsDNS1123Label(n) {
				problems = append(problems, Problem{Field: field + ".name", Detail: fmt.Sprintf("%q: %s", n, msg)})
			}
		}
		image, _ := c["image"].(string)
		switch {
		case image == "":
			problems = append(problems, Problem{Field: field + ".image", Detail: "required: every container needs an image"})
		case strings.TrimSpace(image) == "":
		default:
			if _, err := name.ParseReference(image); err != nil {
				problems = append(problems, Problem{Field: field + ".image", Detail: fmt.Sprintf(
					"%q is not an image reference (%v): the kubelet would refuse it; write [REGISTRY/]REPOSITORY[:TAG][@DIGEST], the repository in lower case", image, err)})
			}
		}
	})
	return problems
}
