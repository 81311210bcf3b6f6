package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"pkgsync.dev/pkgsync/internal/hosted"
)

const (
	// fieldOwner is the demo's field manager, apart from the controller's.
	fieldOwner = "pkgsync-demo"

	hostedClusterNamespace = "clusters"
	hostedClusterName      = "demo"
)

// hcpNamespace is the hosted-control-plane namespace HyperShift would create for clusters/demo.
var hcpNamespace = hosted.ControlPlaneNamespace(hostedClusterNamespace, hostedClusterName)

// installCRDs applies pkgsync's CRDs from config/crd/bases, as `kubectl apply --server-side -k
// config/crd` would, and waits until the API server serves them.
func installCRDs(ctx context.Context, c client.Client, dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, fmt.Errorf("find CRDs in %s: %w", dir, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("find CRDs in %s: none found (run the demo from the repository root)", dir)
	}
	sort.Strings(files)
	var names []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read CRD: %w", err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &u.Object); err != nil {
			return nil, fmt.Errorf("parse CRD %s: %w", f, err)
		}
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
			return nil, fmt.Errorf("apply CRD %s: %w", f, err)
		}
		names = append(names, u.GetName())
	}
	for _, name := range names {
		if err := waitEstablished(ctx, c, name); err != nil {
			return nil, err
		}
	}
	return names, nil
}

// hostedClusterCRD is a small stand-in for HyperShift's HostedCluster CRD: the real one is
// ~600 KB, and pkgsync reads only metadata and status.conditions.
func hostedClusterCRD() *apiextensionsv1.CustomResourceDefinition {
	preserve := apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "hostedclusters.hypershift.openshift.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: hosted.HostedClusterGVK.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural: "hostedclusters", Singular: "hostedcluster", Kind: hosted.HostedClusterGVK.Kind,
				ListKind: hosted.HostedClusterGVK.Kind + "List", ShortNames: []string{"hc"},
			},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: hosted.HostedClusterGVK.Version, Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type:       "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": preserve, "status": preserve},
				}},
			}},
		},
	}
}

func installHostedClusterCRD(ctx context.Context, c client.Client) error {
	crd := hostedClusterCRD()
	if err := c.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the HostedCluster CRD: %w", err)
	}
	return waitEstablished(ctx, c, crd.Name)
}

func waitEstablished(ctx context.Context, c client.Client, name string) error {
	return poll(ctx, 100*time.Millisecond, func() (bool, error) {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &crd); err != nil {
			return false, fmt.Errorf("read CRD %s: %w", name, err)
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	}, "CRD "+name+" to be established")
}

// controlPlaneEndpoint is status.controlPlaneEndpoint of a HostedCluster whose hosted API server
// is at server (an https:// URL): pkgsync accepts a connector kubeconfig naming that address.
func controlPlaneEndpoint(server string) (map[string]any, error) {
	u, err := url.Parse(server)
	if err != nil {
		return nil, fmt.Errorf("hosted API server %q: %w", server, err)
	}
	port, err := strconv.ParseInt(u.Port(), 10, 32)
	if err != nil {
		return nil, fmt.Errorf("hosted API server %q has no port: %w", server, err)
	}
	return map[string]any{"host": u.Hostname(), "port": port}, nil
}

// createHostedCluster creates the HostedCluster clusters/demo, not yet Available, the way
// HyperShift shows a cluster whose control plane is still starting, advertising its hosted API
// server at endpoint.
func createHostedCluster(ctx context.Context, c client.Client, endpoint map[string]any) error {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hostedClusterNamespace}}); err != nil {
		return fmt.Errorf("create namespace %s: %w", hostedClusterNamespace, err)
	}
	hc := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"platform": map[string]any{"type": "None"},
			"release":  map[string]any{"image": "quay.io/openshift-release-dev/ocp-release:4.20.0-multi"},
		},
	}}
	hc.SetGroupVersionKind(hosted.HostedClusterGVK)
	hc.SetNamespace(hostedClusterNamespace)
	hc.SetName(hostedClusterName)
	if err := c.Create(ctx, hc); err != nil {
		return fmt.Errorf("create HostedCluster %s/%s: %w", hostedClusterNamespace, hostedClusterName, err)
	}
	hc.Object["status"] = map[string]any{"controlPlaneEndpoint": endpoint}
	if err := c.Status().Update(ctx, hc); err != nil {
		return fmt.Errorf("set HostedCluster %s/%s status.controlPlaneEndpoint: %w", hostedClusterNamespace, hostedClusterName, err)
	}
	return setHostedClusterAvailable(ctx, c, false, "WaitingForControlPlane", "the hosted control plane is starting")
}

// setHostedClusterAvailable writes the Available condition through the status subresource, as
// HyperShift does when the hosted control plane comes up.
func setHostedClusterAvailable(ctx context.Context, c client.Client, available bool, reason, message string) error {
	status := "False"
	if available {
		status = "True"
	}
	hc := &unstructured.Unstructured{}
	hc.SetGroupVersionKind(hosted.HostedClusterGVK)
	hc.SetNamespace(hostedClusterNamespace)
	hc.SetName(hostedClusterName)
	patch := map[string]any{"status": map[string]any{"conditions": []any{map[string]any{
		"type": "Available", "status": status, "reason": reason, "message": message,
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
	}}}}
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	if err := c.Status().Patch(ctx, hc, client.RawPatch(types.MergePatchType, data)); err != nil {
		return fmt.Errorf("set HostedCluster %s/%s Available=%s: %w", hostedClusterNamespace, hostedClusterName, status, err)
	}
	return nil
}

// createControlPlaneNamespace creates the HCP namespace with the connector Secret HyperShift
// keeps there: a kubeconfig with a system:masters client certificate for the hosted API server.
func createControlPlaneNamespace(ctx context.Context, c client.Client, kubeconfig []byte) error {
	return createNamespaceWithConnector(ctx, c, hcpNamespace, kubeconfig)
}

// createNamespaceWithConnector creates a hosted-control-plane namespace and its connector Secret.
func createNamespaceWithConnector(ctx context.Context, c client.Client, name string, kubeconfig []byte) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   name,
		Labels: map[string]string{"hypershift.openshift.io/hosted-control-plane": "true"},
	}}
	if err := c.Create(ctx, ns); err != nil {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: hosted.DefaultSecretName},
		Data:       map[string][]byte{hosted.DefaultSecretKey: kubeconfig},
	}
	if err := c.Create(ctx, secret); err != nil {
		return fmt.Errorf("create Secret %s/%s: %w", name, hosted.DefaultSecretName, err)
	}
	return nil
}

// poll calls check every interval until it reports done, fails, or ctx ends. Its error names
// what it waited for and why it stopped (the demo's deadline, or Ctrl-C).
func poll(ctx context.Context, interval time.Duration, check func() (bool, error), what string) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		done, err := check()
		if err != nil && ctx.Err() == nil {
			return err
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, context.Cause(ctx))
		case <-tick.C:
		}
	}
}
