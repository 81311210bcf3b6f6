package testenv

import (
	"embed"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// HyperShift's objects as its CLI and operators write them, for the tests and the demo. pkgsync
// does not import HyperShift's Go types (they bring OpenShift's API and more); testenv does not
// import pkgsync's hosted package either (its tests import testenv), so the few names it needs are
// spelled here.

//go:embed hypershift/*.yaml
var hyperShiftCRDFiles embed.FS

// HyperShiftCRDs returns the HostedCluster and HostedControlPlane CRDs the tests install: HyperShift's
// own schema for every field pkgsync reads and for every field HyperShift requires, so that the API
// server refuses what HyperShift's would (see the files in hypershift/ for what was kept and from
// which HyperShift commit).
func HyperShiftCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, name := range []string{"hypershift/hostedclusters.yaml", "hypershift/hostedcontrolplanes.yaml"} {
		data, err := hyperShiftCRDFiles.ReadFile(name)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return nil, fmt.Errorf("decode %s: %w", name, err)
		}
		crds = append(crds, crd)
	}
	return crds, nil
}

// HyperShift's API version, and the names its operators write that the builders below use.
const (
	hyperShiftAPIVersion = "hypershift.openshift.io/v1beta1"
	// ReleaseImage is the OpenShift release the tests' HostedClusters run.
	ReleaseImage = "quay.io/openshift-release-dev/ocp-release:4.20.0-multi"
	// ConnectorSecretName and ConnectorSecretKey locate the kubeconfig HyperShift's control-plane
	// operator writes for components on the management cluster.
	ConnectorSecretName = "service-network-admin-kubeconfig"
	ConnectorSecretKey  = "kubeconfig"
	// hostedClusterAnnotation names a HostedControlPlane's HostedCluster, <namespace>/<name>.
	hostedClusterAnnotation = "hypershift.openshift.io/cluster"
	// kubeconfigScopeLabel tells what a kubeconfig Secret is for; "local" is the service network's.
	kubeconfigScopeLabel = "hypershift.openshift.io/kubeconfig"
)

// HostedCluster returns the HostedCluster namespace/name as `hypershift create cluster none
// --render --external-api-server-address 192.168.1.100` writes it (HyperShift's render fixtures
// in cmd/cluster/none/testdata), with a release image the render would have pulled. Its pull
// secret, etcd encryption key and SSH key are named as that command names them; no test creates
// those Secrets, as no HyperShift operator reads them here. Callers add labels, annotations and
// the like to the returned object.
func HostedCluster(namespace, name string) *unstructured.Unstructured {
	services := []any{}
	for _, service := range []string{"APIServer", "Ignition", "Konnectivity", "OAuthServer", "OIDC"} {
		services = append(services, map[string]any{"service": service, "servicePublishingStrategy": map[string]any{
			"type": "NodePort", "nodePort": map[string]any{"address": "192.168.1.100"}}})
	}
	hc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": hyperShiftAPIVersion, "kind": "HostedCluster",
		"metadata": map[string]any{"namespace": namespace, "name": name},
		"spec": map[string]any{
			"autoscaling":                  map[string]any{},
			"capabilities":                 map[string]any{},
			"configuration":                map[string]any{},
			"controllerAvailabilityPolicy": "SingleReplica",
			"dns":                          map[string]any{"baseDomain": "example.com"},
			"etcd": map[string]any{"managementType": "Managed", "managed": map[string]any{"storage": map[string]any{
				"type": "PersistentVolume", "persistentVolume": map[string]any{"size": "8Gi"}}}},
			"fips": false,
			// The render appends five random characters to the name; an infraID takes no dots.
			"infraID": strings.ReplaceAll(name, ".", "-") + "-x5ltc",
			"networking": map[string]any{
				"clusterNetwork": []any{map[string]any{"cidr": "10.132.0.0/14"}},
				"networkType":    "OVNKubernetes",
				"serviceNetwork": []any{map[string]any{"cidr": "172.31.0.0/16"}},
			},
			"olmCatalogPlacement": "management",
			"platform":            map[string]any{"type": "None"},
			"pullSecret":          map[string]any{"name": name + "-pull-secret"},
			"release":             map[string]any{"image": ReleaseImage},
			"secretEncryption": map[string]any{"type": "aescbc", "aescbc": map[string]any{
				"activeKey": map[string]any{"name": name + "-etcd-encryption-key"}}},
			"services": services,
			"sshKey":   map[string]any{},
		},
	}}
	return hc
}

// HostedControlPlane returns the HostedControlPlane HyperShift's operator keeps for hc in its
// hosted-control-plane namespace: named like hc, naming it in the annotation
// hypershift.openshift.io/cluster, with the spec it copies from hc's (reconcileHostedControlPlane
// in HyperShift's hostedcluster controller).
func HostedControlPlane(hc *unstructured.Unstructured, controlPlaneNamespace string) *unstructured.Unstructured {
	spec := map[string]any{
		"releaseImage": ReleaseImage,
		"pullSecret":   map[string]any{"name": "pull-secret"},
		"issuerURL":    "https://kubernetes.default.svc",
		"sshKey":       map[string]any{},
	}
	for _, field := range []string{"infraID", "platform", "dns", "services", "etcd", "networking", "controllerAvailabilityPolicy", "olmCatalogPlacement"} {
		if v, ok, _ := unstructured.NestedFieldCopy(hc.Object, "spec", field); ok {
			spec[field] = v
		}
	}
	if image, ok, _ := unstructured.NestedString(hc.Object, "spec", "release", "image"); ok {
		spec["releaseImage"] = image
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": hyperShiftAPIVersion, "kind": "HostedControlPlane",
		"metadata": map[string]any{"namespace": controlPlaneNamespace, "name": hc.GetName(),
			"annotations": map[string]any{hostedClusterAnnotation: hc.GetNamespace() + "/" + hc.GetName()}},
		"spec": spec,
	}}
}

// ConnectorSecret returns the Secret service-network-admin-kubeconfig of a hosted-control-plane
// namespace as HyperShift's control-plane operator writes it: Opaque, labelled with the
// kubeconfig's scope, the kubeconfig under the key kubeconfig (see ConnectorKubeconfig).
func ConnectorSecret(namespace string, kubeconfig []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: ConnectorSecretName,
			Labels: map[string]string{kubeconfigScopeLabel: "local"}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{ConnectorSecretKey: kubeconfig},
	}
}

// Condition returns a HostedCluster status condition (a metav1.Condition) as HyperShift's
// operator writes the two pkgsync reads: Available (reasons AsExpected and WaitingForAvailable)
// and ReconciliationActive (ReconciliationActive and ReconciliationPaused); other types get
// AsExpected. generation is the HostedCluster's metadata.generation the condition observed.
func Condition(conditionType string, status bool, message string, generation int64) map[string]any {
	value, reason := "True", "AsExpected"
	switch {
	case conditionType == "ReconciliationActive" && status:
		reason = "ReconciliationActive"
	case conditionType == "ReconciliationActive":
		reason = "ReconciliationPaused"
	case conditionType == "Available" && !status:
		reason = "WaitingForAvailable"
	}
	if !status {
		value = "False"
	}
	return map[string]any{
		"type": conditionType, "status": value, "reason": reason, "message": message,
		"observedGeneration": generation, "lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
	}
}
