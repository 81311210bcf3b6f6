package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/apply"
)

// installFieldManager owns the fields pkgsync install applies.
const installFieldManager = "pkgsync-install"

// pollInterval is how often install and uninstall look at what they wait for.
const pollInterval = 500 * time.Millisecond

// installer applies and removes pkgsync's own objects on a management cluster.
type installer struct {
	client client.Client
	host   string
	dryRun bool
	// image is the controller image being installed, for hints.
	image  string
	stdout io.Writer
	stderr io.Writer
	counts actionCounts
	// pendingNamespaces are namespaces a server-side dry run would create: the API server cannot
	// check objects inside them, since they do not exist yet.
	pendingNamespaces map[string]bool
	// results and released are what was done, object by object (record); with document set
	// (-o json|yaml) they are printed once, at the end, rather than a line each on stdout.
	results  []objectResult
	released []releasedResource
	document bool
}

// actionCounts tallies what an install did.
type actionCounts struct{ created, configured, unchanged int }

func (c actionCounts) String() string {
	return fmt.Sprintf("%d created, %d configured, %d unchanged", c.created, c.configured, c.unchanged)
}

func newInstaller(kube *kubeFlags, stdout, stderr io.Writer) (*installer, error) {
	cfg, err := kube.restConfig()
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = "pkgsync-install"
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("connect to the management cluster %s: %w", cfg.Host, err)
	}
	return &installer{client: c, host: cfg.Host, stdout: stdout, stderr: stderr, pendingNamespaces: map[string]bool{}}, nil
}

// apply brings one object to its desired state with server-side apply. It first sends the
// object as a dry run and compares the answer with the live object: when they are the same, the
// object is not written, so a second install writes nothing.
func (i *installer) apply(ctx context.Context, desired *unstructured.Unstructured) error {
	ref := apply.RefOf(desired)
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(desired.GroupVersionKind())
	exists := true
	if err := i.client.Get(ctx, client.ObjectKeyFromObject(desired), live); apierrors.IsNotFound(err) {
		exists = false
	} else if err != nil {
		return fmt.Errorf("get %s from %s: %w", ref, i.host, err)
	}
	if exists && live.GetDeletionTimestamp() != nil {
		return fmt.Errorf("%s on %s is being deleted (by an earlier uninstall?), finalizers %v: wait until it is gone, then install again",
			ref, i.host, live.GetFinalizers())
	}

	dry, err := i.ssa(ctx, desired, true)
	if err != nil {
		if i.dryRun && apierrors.IsNotFound(err) && i.pendingNamespaces[desired.GetNamespace()] {
			i.counts.created++
			i.record(ref, actionCreated, fmt.Sprintf("not checked by the API server: namespace %s does not exist yet", desired.GetNamespace()))
			return nil
		}
		return fmt.Errorf("apply %s to %s: %w", ref, i.host, err)
	}
	action := actionCreated
	switch {
	case exists && sameObject(live, dry):
		i.counts.unchanged++
		i.record(ref, actionUnchanged, "")
		return nil
	case exists:
		action = actionConfigured
		i.counts.configured++
	default:
		i.counts.created++
	}
	if i.dryRun {
		if desired.GetKind() == "Namespace" && desired.GroupVersionKind().Group == "" && !exists {
			i.pendingNamespaces[desired.GetName()] = true
		}
		i.record(ref, action, "")
		return nil
	}
	if _, err := i.ssa(ctx, desired, false); err != nil {
		return fmt.Errorf("apply %s to %s: %w", ref, i.host, err)
	}
	i.record(ref, action, "")
	return nil
}

// ssa sends a server-side apply, taking over fields other managers hold (install owns these
// objects), and returns the API server's answer.
func (i *installer) ssa(ctx context.Context, desired *unstructured.Unstructured, dryRun bool) (*unstructured.Unstructured, error) {
	obj := desired.DeepCopy()
	opts := []client.ApplyOption{client.FieldOwner(installFieldManager), client.ForceOwnership}
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	if err := i.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), opts...); err != nil {
		return nil, err
	}
	return obj, nil
}

// sameObject reports whether a dry-run answer is the live object unchanged, field ownership
// included: an install takes over the fields another manager (kubectl apply -k, an older
// install) holds, so that it can remove them in a later release. The timestamps of
// managedFields are left out; the API server changes them only along with the fields.
func sameObject(live, dry *unstructured.Unstructured) bool {
	strip := func(u *unstructured.Unstructured) map[string]any {
		c := u.DeepCopy()
		fields := c.GetManagedFields()
		for j := range fields {
			fields[j].Time = nil
		}
		c.SetManagedFields(fields)
		return c.Object
	}
	return equality.Semantic.DeepEqual(strip(live), strip(dry))
}

// waitEstablished waits until a CustomResourceDefinition is Established, so that resources of
// its kind can be created.
func (i *installer) waitEstablished(ctx context.Context, crd *unstructured.Unstructured, timeout time.Duration) error {
	ref := apply.RefOf(crd)
	last := "not observed yet"
	err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(crd.GroupVersionKind())
		if err := i.client.Get(ctx, client.ObjectKeyFromObject(crd), live); err != nil {
			last = err.Error()
			return false, client.IgnoreNotFound(err)
		}
		established, message := condition(live, "Established")
		if established {
			return true, nil
		}
		last = message
		if ok, msg := condition(live, "NamesAccepted"); !ok && msg != "" {
			last = "NamesAccepted: " + msg
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("%s is not Established after %s (%s): see kubectl describe crd %s", ref, timeout, last, crd.GetName())
	}
	return nil
}

// waitAvailable waits until kstatus reports a Deployment Current: rolled out, with its replicas
// updated, ready and available.
func (i *installer) waitAvailable(ctx context.Context, deploy *unstructured.Unstructured, timeout time.Duration) error {
	ref := apply.RefOf(deploy)
	last := "not observed yet"
	err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(deploy.GroupVersionKind())
		if err := i.client.Get(ctx, client.ObjectKeyFromObject(deploy), live); err != nil {
			last = err.Error()
			return false, client.IgnoreNotFound(err)
		}
		res, err := status.Compute(live)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = fmt.Sprintf("%s: %s", res.Status, res.Message)
		return res.Status == status.CurrentStatus, nil
	})
	if err != nil {
		return fmt.Errorf("%s is not Available after %s (%s): can the nodes pull %s? See kubectl -n %s describe deployment %s, "+
			"its pods' events, and kubectl -n %s logs deployment/%s; install --wait=false does not wait",
			ref, timeout, last, i.image, deploy.GetNamespace(), deploy.GetName(), deploy.GetNamespace(), deploy.GetName())
	}
	return nil
}

// condition returns whether the condition of that type is True, and its message.
func condition(obj *unstructured.Unstructured, conditionType string) (bool, string) {
	conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conditions {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != conditionType {
			continue
		}
		message, _ := m["message"].(string)
		return m["status"] == "True", message
	}
	return false, ""
}
