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
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/test/testenv"
)

const (
	// reconciler.FieldOwner is the demo's field manager, apart from the controller's.
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

// installHyperShiftCRDs installs HyperShift's HostedCluster and HostedControlPlane CRDs (the
// tests' trimmed copies: HyperShift's schema for what pkgsync reads and HyperShift requires).
func installHyperShiftCRDs(ctx context.Context, c client.Client) error {
	crds, err := testenv.HyperShiftCRDs()
	if err != nil {
		return err
	}
	for _, crd := range crds {
		if err := c.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create the CRD %s: %w", crd.Name, err)
		}
		if err := waitEstablished(ctx, c, crd.Name); err != nil {
			return err
		}
	}
	return nil
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

// createHostedCluster creates the HostedCluster clusters/demo as `hypershift create cluster none`
// does, not yet Available, the way HyperShift shows a cluster whose control plane is still
// starting, advertising its hosted API server at endpoint.
func createHostedCluster(ctx context.Context, c client.Client, endpoint map[string]any) (*unstructured.Unstructured, error) {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hostedClusterNamespace}}); err != nil {
		return nil, fmt.Errorf("create namespace %s: %w", hostedClusterNamespace, err)
	}
	hc := testenv.HostedCluster(hostedClusterNamespace, hostedClusterName)
	if err := c.Create(ctx, hc); err != nil {
		return nil, fmt.Errorf("create HostedCluster %s/%s: %w", hostedClusterNamespace, hostedClusterName, err)
	}
	hc.Object["status"] = map[string]any{"controlPlaneEndpoint": endpoint}
	if err := c.Status().Update(ctx, hc); err != nil {
		return nil, fmt.Errorf("set HostedCluster %s/%s status.controlPlaneEndpoint: %w", hostedClusterNamespace, hostedClusterName, err)
	}
	return hc, setHostedClusterAvailable(ctx, c, false, "Waiting for hosted control plane to be healthy")
}

// setHostedClusterAvailable writes the Available condition through the status subresource, as
// HyperShift does when the hosted control plane comes up.
func setHostedClusterAvailable(ctx context.Context, c client.Client, available bool, message string) error {
	hc := &unstructured.Unstructured{}
	hc.SetGroupVersionKind(hosted.HostedClusterGVK)
	hc.SetNamespace(hostedClusterNamespace)
	hc.SetName(hostedClusterName)
	// A merge patch replaces the whole list: the demo's HostedCluster has no other condition.
	patch := map[string]any{"status": map[string]any{"conditions": []any{testenv.Condition("Available", available, message, 1)}}}
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	if err := c.Status().Patch(ctx, hc, client.RawPatch(types.MergePatchType, data)); err != nil {
		return fmt.Errorf("set HostedCluster %s/%s Available=%t: %w", hostedClusterNamespace, hostedClusterName, available, err)
	}
	return nil
}

// createControlPlaneNamespace creates the HCP namespace of hc with the HostedControlPlane and the
// connector Secret HyperShift keeps there: a kubeconfig with a system:masters client certificate
// for the hosted API server.
func createControlPlaneNamespace(ctx context.Context, c client.Client, hc *unstructured.Unstructured, kubeconfig []byte) error {
	return createNamespaceWithConnector(ctx, c, hc, hcpNamespace, kubeconfig)
}

// createNamespaceWithConnector creates the hosted-control-plane namespace name of hc, with its
// HostedControlPlane and connector Secret, each as HyperShift writes them.
func createNamespaceWithConnector(ctx context.Context, c client.Client, hc *unstructured.Unstructured, name string, kubeconfig []byte) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   name,
		Labels: map[string]string{"hypershift.openshift.io/hosted-control-plane": "true"},
	}}
	if err := c.Create(ctx, ns); err != nil {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	if err := c.Create(ctx, testenv.HostedControlPlane(hc, name)); err != nil {
		return fmt.Errorf("create HostedControlPlane %s/%s: %w", name, hc.GetName(), err)
	}
	if err := c.Create(ctx, testenv.ConnectorSecret(name, kubeconfig)); err != nil {
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
