package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/config"
)

func newUninstallCmd() *cobra.Command {
	var (
		cluster clusterFlags
		force   bool
		output  *outputFlag
	)
	cmd := &cobra.Command{
		Use:   "uninstall [--force]",
		Short: "Remove the pkgsync controller, RBAC and CRDs from a management cluster",
		Long: `Uninstall deletes what "pkgsync install" applies: the controller Deployment first, then the
RBAC, the CustomResourceDefinitions and the namespace, and waits until they are gone
(--wait=false to return at once).

While Packages, ClusterPackages, ObjectDeployments, ClusterObjectDeployments or
HostedClusterPackages exist (TrustPolicies do not count), uninstall refuses: delete them first, so that the controller removes what they applied. --force uninstalls
anyway: it stops the controller, removes the pkgsync finalizer from every such resource and
deletes them with their CRDs, and lists the objects they applied, which stay in the management
cluster and the hosted clusters.

Each object goes to stdout with what happened to it (deleted, not found); progress goes to
stderr. -o json and -o yaml print the result once uninstall ends, as one document (also when it
fails part way: what was deleted so far):
{"namespace":..,"objects":[{"object":..,"action":..}],"released":[{"object":..,"stay":[{"cluster":..,"object":..,"phase":..}]}]}.`,
		Example: `  pkgsync uninstall
  pkgsync uninstall --force --kubeconfig mgmt.kubeconfig
  pkgsync uninstall -o yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := output.check(); err != nil {
				return err
			}
			if err := cluster.validate(); err != nil {
				return err
			}
			objs, err := config.Render(config.Options{Namespace: cluster.namespace})
			if err != nil {
				return err
			}
			sortForInstall(objs)
			inst, err := newInstaller(cluster.kube, cmd.OutOrStdout(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			inst.document = output.document()
			fmt.Fprintf(inst.stderr, "uninstalling pkgsync from namespace %s on %s\n", cluster.namespace, inst.host)
			err = inst.uninstall(cmd.Context(), objs, cluster, force)
			if inst.document && (err == nil || len(inst.results) > 0) {
				report := &uninstallReport{Namespace: cluster.namespace, Objects: append([]objectResult{}, inst.results...),
					Released: append([]releasedResource{}, inst.released...)}
				err = writeResult(cmd, output, "the uninstall result", report, err)
			}
			return err
		},
	}
	cluster.ApplyFlags(cmd.Flags())
	cmd.Flags().BoolVar(&cluster.wait, "wait", true, "Wait until every deleted object is gone")
	cmd.Flags().BoolVar(&force, "force", false, "Uninstall although pkgsync resources exist; the objects they applied stay in the clusters")
	output = addOutputFlag(cmd.Flags(), outputText)
	return cmd
}

// uninstall deletes objs in reverse install order (the Deployment first, the Namespace last).
func (i *installer) uninstall(ctx context.Context, objs []*unstructured.Unstructured, cluster clusterFlags, force bool) error {
	waitCtx, cancel := context.WithTimeout(ctx, cluster.timeout)
	defer cancel()
	crds, _ := splitCRDs(objs)
	resources, err := i.listResources(ctx, crds)
	if err != nil {
		return err
	}
	if len(resources) > 0 && !force {
		return fmt.Errorf("%d pkgsync resources still exist on %s (%s): uninstalling would stop reconciling them and leave "+
			"what they applied in the clusters. Delete them first and let the controller remove their objects "+
			"(kubectl delete hostedclusterpackages,packages,clusterpackages,objectdeployments,clusterobjectdeployments --all-namespaces --all), "+
			"or pass --force to uninstall anyway and leave their objects where they are", len(resources), i.host, listRefs(resources, 10))
	}

	var deleted []*unstructured.Unstructured
	for _, obj := range slices.Backward(objs) {
		gone, err := i.delete(ctx, obj)
		if err != nil {
			return err
		}
		if !gone {
			deleted = append(deleted, obj)
		}
		if obj.GetKind() == "Deployment" && len(resources) > 0 {
			// The controller must be stopped before the finalizers go: a running controller
			// would add them again, or prune the objects --force promises to leave.
			if err := i.waitPodsGone(waitCtx, obj, cluster); err != nil {
				return err
			}
			if err := i.release(ctx, resources); err != nil {
				return err
			}
		}
	}
	if cluster.wait {
		fmt.Fprintf(i.stderr, "waiting for %d objects to be deleted (--timeout %s)\n", len(deleted), cluster.timeout)
		for _, obj := range deleted {
			if err := i.waitGone(waitCtx, obj, cluster); err != nil {
				return err
			}
		}
	}
	fmt.Fprintln(i.stderr, "pkgsync uninstalled")
	return nil
}

// listResources lists the resources of every pkgsync kind whose CRD is installed and that
// applies objects: TrustPolicies apply none, and go with their CRD.
func (i *installer) listResources(ctx context.Context, crds []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, crd := range crds {
		gvk, err := servedKind(crd)
		if err != nil {
			return nil, err
		}
		if gvk.Kind == v1alpha1.TrustPolicyKind {
			continue
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := i.client.List(ctx, list); err != nil {
			if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
				continue // not installed
			}
			return nil, fmt.Errorf("list %s on %s: %w", gvk.Kind, i.host, err)
		}
		for j := range list.Items {
			out = append(out, &list.Items[j])
		}
	}
	return out, nil
}

// servedKind is the kind a CRD defines, at its storage version.
func servedKind(crd *unstructured.Unstructured) (schema.GroupVersionKind, error) {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if name, _ := m["name"].(string); name != "" && m["storage"] == true {
			return schema.GroupVersionKind{Group: group, Version: name, Kind: kind}, nil
		}
	}
	return schema.GroupVersionKind{}, fmt.Errorf("the embedded CRD %s has no storage version", crd.GetName())
}

// delete deletes one object; gone reports that it did not exist.
func (i *installer) delete(ctx context.Context, obj *unstructured.Unstructured) (gone bool, err error) {
	ref := apply.RefOf(obj)
	err = i.client.Delete(ctx, obj.DeepCopy(), client.PropagationPolicy(metav1.DeletePropagationBackground))
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		i.record(ref, actionNotFound, "")
		return true, nil
	case err != nil:
		return false, fmt.Errorf("delete %s from %s: %w", ref, i.host, err)
	}
	i.record(ref, actionDeleted, "")
	return false, nil
}

// waitPodsGone waits until no pod of the controller Deployment runs.
func (i *installer) waitPodsGone(ctx context.Context, deploy *unstructured.Unstructured, cluster clusterFlags) error {
	selector, _, _ := unstructured.NestedStringMap(deploy.Object, "spec", "selector", "matchLabels")
	if len(selector) == 0 {
		return fmt.Errorf("the embedded %s has no spec.selector.matchLabels", apply.RefOf(deploy))
	}
	fmt.Fprintf(i.stderr, "waiting for the controller's pods to stop before releasing pkgsync resources\n")
	running := 0
	err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := i.client.List(ctx, &pods, client.InNamespace(deploy.GetNamespace()), client.MatchingLabels(selector)); err != nil {
			return false, err
		}
		running = len(pods.Items)
		return running == 0, nil
	})
	if err != nil {
		return fmt.Errorf("%d pods of %s still run after %s (%w); they would put back the finalizers that --force removes: "+
			"see kubectl -n %s get pods -l %s", running, apply.RefOf(deploy), cluster.timeout, err, deploy.GetNamespace(), labelSelector(selector))
	}
	return nil
}

// release removes pkgsync's finalizer from every resource, so that deleting them (with their
// CRDs) does not wait for a controller that no longer runs, and prints what stays in the clusters.
func (i *installer) release(ctx context.Context, resources []*unstructured.Unstructured) error {
	for _, r := range resources {
		ref := apply.RefOf(r)
		if slices.Contains(r.GetFinalizers(), v1alpha1.FinalizerName) {
			patched := r.DeepCopy()
			patched.SetFinalizers(slices.DeleteFunc(slices.Clone(r.GetFinalizers()), func(f string) bool { return f == v1alpha1.FinalizerName }))
			// Optimistic lock: a finalizer list changed meanwhile is not overwritten.
			if err := i.client.Patch(ctx, patched, client.MergeFromWithOptions(r, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("remove the finalizer of %s on %s: %w", ref, i.host, err)
			}
		}
		left, err := inventoryOf(r)
		released := releasedResource{Object: ref.String(), Stay: left}
		if err != nil {
			released.Problem = "status.inventory does not parse: " + err.Error()
		}
		i.recordReleased(released)
	}
	return nil
}

// inventoryOf lists the objects a resource's status says it applied, each with its cluster: as
// groups, or one string per object as versions before groups wrote them.
func inventoryOf(r *unstructured.Unstructured) ([]appliedObject, error) {
	out := []appliedObject{}
	raw, ok, _ := unstructured.NestedMap(r.Object, "status", "inventory")
	if !ok {
		return out, nil
	}
	var inv v1alpha1.Inventory
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &inv); err != nil {
		return out, err
	}
	for _, phase := range inv.Phases {
		where := "management cluster"
		if phase.Class == v1alpha1.ClassHostedCluster {
			where = "hosted cluster"
		}
		for _, o := range phase.Objects {
			parts := strings.Split(o, "/")
			ref := o
			if len(parts) == 5 {
				ref = apply.ObjectRef{Group: parts[0], Version: parts[1], Kind: parts[2], Namespace: parts[3], Name: parts[4]}.String()
			}
			out = append(out, appliedObject{Cluster: where, Object: ref, Phase: phase.Name})
		}
		for _, g := range phase.Groups {
			for _, name := range g.Names {
				ref := apply.ObjectRef{Group: g.Group, Version: g.Version, Kind: g.Kind, Namespace: g.Namespace, Name: name}
				out = append(out, appliedObject{Cluster: where, Object: ref.String(), Phase: phase.Name})
			}
		}
	}
	return out, nil
}

// waitGone waits until a deleted object no longer exists.
func (i *installer) waitGone(ctx context.Context, obj *unstructured.Unstructured, cluster clusterFlags) error {
	ref := apply.RefOf(obj)
	last := ""
	err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(obj.GroupVersionKind())
		err := i.client.Get(ctx, client.ObjectKeyFromObject(obj), live)
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		last = fmt.Sprintf("finalizers %v", live.GetFinalizers())
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("%s is still there after %s (%s, %w): see kubectl get %s -o yaml; uninstall --wait=false does not wait",
			ref, cluster.timeout, last, err, strings.ToLower(obj.GetKind())+" "+qualifiedName(obj))
	}
	return nil
}

// listRefs names up to max resources, and how many more there are.
func listRefs(objs []*unstructured.Unstructured, max int) string {
	var names []string
	for j, o := range objs {
		if j == max {
			names = append(names, fmt.Sprintf("and %d more", len(objs)-max))
			break
		}
		names = append(names, apply.RefOf(o).String())
	}
	return strings.Join(names, ", ")
}

func labelSelector(m map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ",")
}

func qualifiedName(obj *unstructured.Unstructured) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetName() + " -n " + obj.GetNamespace()
}
