package schema

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/validate/content"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// checkMetadata checks what every object's metadata shares, whatever its kind: the namespace
// is a DNS-1123 label, labels and annotations are valid keys and values (annotations at most
// 256 KiB in all), as apimachinery's ValidateObjectMeta checks them for every kind.
func checkMetadata(obj *unstructured.Unstructured) []Problem {
	var errs field.ErrorList
	if ns := obj.GetNamespace(); ns != "" {
		for _, msg := range apimachineryvalidation.ValidateNamespaceName(ns, false) {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "namespace"), ns, msg))
		}
	}
	errs = append(errs, metav1validation.ValidateLabels(obj.GetLabels(), field.NewPath("metadata", "labels"))...)
	errs = append(errs, apimachineryvalidation.ValidateAnnotations(obj.GetAnnotations(), field.NewPath("metadata", "annotations"))...)
	return fieldProblems(errs)
}

// nameRules are the built-in kinds whose metadata.name the API server checks otherwise than as
// a DNS-1123 subdomain: the rule of every other built-in kind and of custom resources, by which
// the kinds the checker has no schema for are checked too (an aggregated API server may have a
// rule of its own, seldom a looser one). Kept by
// hand from k8s.io/kubernetes/pkg/apis/*/validation (Validate*Name) of the release in
// kubernetesVersion, which is not importable; a kind with a rule of its own (IP addresses,
// certificate signing requests, ...) is checked only as a path segment, which every name is.
var nameRules = map[schema.GroupKind]apimachineryvalidation.ValidateNameFunc{
	{Kind: "Namespace"}: apimachineryvalidation.ValidateNamespaceName,
	// A DNS-1123 label since 1.36 (RelaxedServiceNameValidation, on by default); a DNS-1035
	// label, starting with a letter, before.
	{Kind: "Service"}:                                                 apimachineryvalidation.NameIsDNSLabel,
	{Group: "apps", Kind: "StatefulSet"}:                              apimachineryvalidation.NameIsDNSLabel,
	{Group: "rbac.authorization.k8s.io", Kind: "Role"}:                pathSegmentName,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:         pathSegmentName,
	{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}:         pathSegmentName,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:  pathSegmentName,
	{Group: "networking.k8s.io", Kind: "IPAddress"}:                   pathSegmentName,
	{Group: "certificates.k8s.io", Kind: "CertificateSigningRequest"}: pathSegmentName,
	{Group: "certificates.k8s.io", Kind: "ClusterTrustBundle"}:        pathSegmentName,
	{Group: "internal.apiserver.k8s.io", Kind: "StorageVersion"}:      pathSegmentName,
	{Group: "coordination.k8s.io", Kind: "LeaseCandidate"}:            pathSegmentName,
	{Group: "scheduling.k8s.io", Kind: "Workload"}:                    pathSegmentName,
}

// olderNameRules are the name rules of kinds whose rule changed in a release since, which
// releases before it keep: checked for an older target (Checker.For), said in ReleaseRules.
var olderNameRules = []struct {
	gk    schema.GroupKind
	since Release
	rule  apimachineryvalidation.ValidateNameFunc
	says  string
}{
	{schema.GroupKind{Kind: "Service"}, Release{1, 36}, apimachineryvalidation.NameIsDNS1035Label,
		"a Service's metadata.name is a DNS-1035 label (starting with a letter), as before Kubernetes 1.36"},
}

// pathSegmentName is the rule every name meets: one that can be a segment of a URL path (RBAC's
// ValidateRBACName).
func pathSegmentName(name string, _ bool) []string {
	return content.IsPathSegmentName(name)
}

// checkName checks metadata.name by the rule of its kind in the target release.
func checkName(gk schema.GroupKind, name string, target Release) []Problem {
	rule, ok := nameRules[gk]
	if !ok {
		rule = apimachineryvalidation.NameIsDNSSubdomain
	}
	for _, r := range olderNameRules {
		if r.gk == gk && target.before(r.since) {
			rule = r.rule
		}
	}
	var problems []Problem
	for _, msg := range rule(name, false) {
		problems = append(problems, Problem{Field: "metadata.name", Detail: fmt.Sprintf("%q: %s", name, msg)})
	}
	return problems
}

// fieldProblems turns the API machinery's field errors into problems.
func fieldProblems(errs field.ErrorList) []Problem {
	problems := make([]Problem, 0, len(errs))
	for _, fe := range errs {
		problems = append(problems, Problem{Field: fe.Field, Detail: strings.TrimSpace(fe.ErrorBody())})
	}
	return problems
}
