package applier

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/internal/reconciler"
)

// HostedBehind is what is behind a namespace: its HostedCluster (nil for cluster-scoped owners,
// namespaces without one, or clusters without HyperShift's API), or why none can be told.
type HostedBehind struct {
	Cluster *hosted.HostedCluster
	// Ambiguous says that several HostedClusters map to the namespace and HyperShift's
	// HostedControlPlane there names none of them: templates see no HostedCluster, and
	// hosted-cluster phases are refused (admitHosted).
	Ambiguous *hosted.AmbiguousError
}

// FindHostedCluster returns what is behind a namespace. Reconcilers call it once and hand the
// result to templates and to the hosted-phase gate. The HostedControlPlanes of a namespace are
// read, uncached, only where several HostedClusters map to it.
func (r *Applier) FindHostedCluster(ctx context.Context, namespace string) (HostedBehind, error) {
	if namespace == "" {
		return HostedBehind{}, nil
	}
	hc, err := hosted.FindHostedCluster(ctx, r.Reader, r.APIReader, namespace, r.HostedClustersIndexed)
	var ambiguous *hosted.AmbiguousError
	if errors.As(err, &ambiguous) {
		return HostedBehind{Ambiguous: ambiguous}, nil
	}
	return HostedBehind{Cluster: hc}, err
}

// admitHosted returns nil when namespace may send phases to a hosted cluster under the rule;
// behind is what findHostedCluster found behind it. A namespace that several HostedClusters map
// to, none of them named by its HostedControlPlane, is refused under either rule: whichever
// cluster the connector Secret reaches, pkgsync cannot tell which HostedCluster it is.
func (r *Applier) admitHosted(ctx context.Context, namespace string, behind HostedBehind) error {
	if behind.Ambiguous != nil {
		return &reconciler.NotHostedError{Namespace: namespace, Why: behind.Ambiguous.Error()}
	}
	switch r.hostedNamespaceRule {
	case reconciler.HostedNamespaceByLabel:
		var ns corev1.Namespace
		if err := r.APIReader.Get(ctx, client.ObjectKey{Name: namespace}, &ns); err != nil {
			return fmt.Errorf("read namespace %s: %w", namespace, err)
		}
		if ns.Labels[reconciler.HostedControlPlaneLabel] != "true" {
			return &reconciler.NotHostedError{Namespace: namespace, Why: fmt.Sprintf("it is not labelled %s=true", reconciler.HostedControlPlaneLabel)}
		}
		return nil
	default:
		if behind.Cluster != nil {
			return nil
		}
		why := "no HyperShift HostedCluster maps to it (HyperShift names a hosted-control-plane namespace <hostedcluster namespace>-<hostedcluster name>)"
		if !r.HostedClustersIndexed {
			why = "the HostedCluster API (hypershift.openshift.io/v1beta1) was not installed when the controller started; start it with --hosted-namespace-rule=Label where only administrators can label namespaces"
		}
		return &reconciler.NotHostedError{Namespace: namespace, Why: why}
	}
}

// openCircuit records that the hosted API server of namespace did not answer during a pass
// (unavailable, found in err), so that the namespace's resources stop sending to it until a probe
// gets an answer, and returns the error to report: the circuit's, which reads the same on every
// retry until it closes. The reconcile's own deadline running out says the pass was long, not
// that the cluster is unreachable: err is returned as it is then.
func (r *Applier) openCircuit(ctx context.Context, namespace string, err error, unavailable *apply.TargetUnavailableError) error {
	if r.Targets.hosted == nil || namespace == "" || ctx.Err() != nil || errors.Is(unavailable.Err, apply.ErrNoTarget) {
		return err
	}
	var down *hosted.UnavailableError
	if errors.As(err, &down) {
		return err // the circuit was open already
	}
	if opened := r.Targets.hosted.MarkUnavailable(namespace, unavailable.Err); opened != nil {
		return opened
	}
	return err
}

// gateOnHostedCluster holds hosted-cluster phases while the HostedCluster behind the namespace
// is not Available, or is paused (ReconciliationActive=False, or spec.pausedUntil "true" or a
// time still to come: HostedCluster.PausedAt). A paused hosted API server still answers, but its
// administrators asked HyperShift to leave the cluster alone and its credentials are no longer
// renewed: pkgsync does not roll out into it either. Teardown is not gated. Without a
// HostedCluster (admitted by the Label rule), the connector Secret alone decides.
func gateOnHostedCluster(hc *hosted.HostedCluster, namespace string, now time.Time) error {
	if hc == nil {
		return nil
	}
	var err error
	if paused, until := hc.PausedAt(now); paused {
		err = &PausedError{Cluster: hc.Namespace + "/" + hc.Name, pausedUntil: hc.PausedUntil, until: until}
	} else if !hc.Available {
		err = fmt.Errorf("HostedCluster %s/%s is not Available: %s", hc.Namespace, hc.Name, hc.Message)
	} else {
		return nil
	}
	return &apply.TargetUnavailableError{Class: classHosted, Target: "hosted cluster " + namespace, Err: err}
}

// PausedError says a HostedCluster's owner paused it; until is when the pause ends by itself
// (spec.pausedUntil), zero when only resuming it ends it.
type PausedError struct {
	Cluster, pausedUntil string
	until                time.Time
}

func (e *PausedError) Error() string {
	if b, err := strconv.ParseBool(e.pausedUntil); err == nil && b {
		return fmt.Sprintf("HostedCluster %s is paused (spec.pausedUntil: %q); hosted-cluster phases wait until it is resumed", e.Cluster, e.pausedUntil)
	}
	if e.until.IsZero() {
		return fmt.Sprintf("HostedCluster %s is paused (ReconciliationActive=False); hosted-cluster phases wait until it is resumed", e.Cluster)
	}
	return fmt.Sprintf("HostedCluster %s is paused until %s (spec.pausedUntil); hosted-cluster phases wait until then", e.Cluster, e.until.UTC().Format(time.RFC3339))
}
