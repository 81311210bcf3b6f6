package applier

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/desired"
	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/internal/reconciler"
)

// TestGateOnHostedCluster: which HostedClusters hold hosted-cluster phases, and what they say.
func TestGateOnHostedCluster(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	hc := func(mutate func(*hosted.HostedCluster)) *hosted.HostedCluster {
		c := &hosted.HostedCluster{Namespace: "clusters", Name: "a", Available: true}
		mutate(c)
		return c
	}
	tests := []struct {
		name   string
		hc     *hosted.HostedCluster
		says   string // "" for no hold
		paused bool
	}{
		{"no HostedCluster (the Label rule): the connector Secret decides", nil, "", false},
		{"available", hc(func(*hosted.HostedCluster) {}), "", false},
		{"not available", hc(func(c *hosted.HostedCluster) { c.Available = false; c.Message = "etcd down" }), "is not Available: etcd down", false},
		{"paused by the condition", hc(func(c *hosted.HostedCluster) { c.Paused = true }), "ReconciliationActive=False", true},
		{"paused until resumed", hc(func(c *hosted.HostedCluster) { c.PausedUntil = "true" }), `spec.pausedUntil: "true"`, true},
		{"paused until a time to come", hc(func(c *hosted.HostedCluster) { c.PausedUntil = now.Add(time.Hour).Format(time.RFC3339) }), "paused until 2026-01-01T13:00:00Z", true},
		{"a pause that ended", hc(func(c *hosted.HostedCluster) { c.PausedUntil = now.Add(-time.Hour).Format(time.RFC3339) }), "", false},
		{"paused wins over not available", hc(func(c *hosted.HostedCluster) { c.Available = false; c.PausedUntil = "true" }), "is paused", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := gateOnHostedCluster(tt.hc, "clusters-a", now)
			if tt.says == "" {
				require.NoError(t, err)
				return
			}
			var unavailable *apply.TargetUnavailableError
			require.ErrorAs(t, err, &unavailable)
			assert.Equal(t, v1alpha1.ClassHostedCluster, unavailable.Class)
			assert.Contains(t, err.Error(), tt.says)
			var paused *PausedError
			assert.Equal(t, tt.paused, errors.As(err, &paused), "a pause")
			assert.Equal(t, v1alpha1.HostedClusterUnavailableReason, reconciler.ReasonFor(err))
		})
	}
}

// TestOpenCircuit: the passes whose failure opens no circuit (nothing then stops the
// namespace's resources sending to the hosted cluster) report their own error as it is.
func TestOpenCircuit(t *testing.T) {
	t.Parallel()
	timeout := &apply.TargetUnavailableError{Class: classHosted, Err: errors.New("i/o timeout")}
	noTarget := &apply.TargetUnavailableError{Class: classHosted, Err: apply.ErrNoTarget}
	open := &apply.TargetUnavailableError{Class: classHosted, Err: &hosted.UnavailableError{Namespace: "clusters-a", Err: errors.New("earlier")}}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	hc := hosted.NewClients(nil, hosted.Options{})
	tests := []struct {
		name      string
		ctx       context.Context
		hosted    *hosted.Clients
		namespace string
		err       *apply.TargetUnavailableError
	}{
		{"hosted phases disabled", t.Context(), nil, "clusters-a", timeout},
		{"a cluster-scoped owner", t.Context(), hc, "", timeout},
		{"the reconcile's own deadline ran out: a long pass, not a dead cluster", canceled, hc, "clusters-a", timeout},
		{"no target for the class: nothing was sent", t.Context(), hc, "clusters-a", noTarget},
		{"the circuit was open already", t.Context(), hc, "clusters-a", open},
		// A namespace without a client has no circuit to open (MarkUnavailable returns nil).
		{"a namespace without a client", t.Context(), hc, "clusters-a", timeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := &Applier{Targets: &Targets{hosted: tt.hosted}}
			wrapped := errors.Join(errors.New("phase x"), tt.err)
			assert.Equal(t, wrapped, r.openCircuit(tt.ctx, tt.namespace, wrapped, tt.err))
		})
	}
}

// TestSplitInventory: the objects a teardown lets go leave the inventory, phases emptied by it
// go, the order of the rest is kept.
func TestSplitInventory(t *testing.T) {
	t.Parallel()
	ref := func(ns, name string) apply.ObjectRef {
		return apply.ObjectRef{Version: "v1", Kind: "ConfigMap", Namespace: ns, Name: name}
	}
	inv := apply.Inventory{Phases: []apply.InventoryPhase{
		{Name: "mgmt", Objects: []apply.ObjectRef{ref("team", "a"), ref("other", "b"), ref("team", "c")}},
		{Name: "hosted", Class: classHosted, Objects: []apply.ObjectRef{ref("kube-system", "d")}},
	}}
	isHosted := func(class string, _ apply.ObjectRef) bool { return class == classHosted }
	kept, out := splitInventory(inv, isHosted, []apply.ObjectRef{ref("x", "earlier")})
	assert.Equal(t, apply.Inventory{Phases: inv.Phases[:1]}, kept)
	assert.Equal(t, []apply.ObjectRef{ref("x", "earlier"), ref("kube-system", "d")}, out)

	inTeam := func(class string, r apply.ObjectRef) bool { return class == "" && r.Namespace == "team" }
	kept, out = splitInventory(inv, inTeam, nil)
	assert.Equal(t, apply.Inventory{Phases: []apply.InventoryPhase{
		{Name: "mgmt", Objects: []apply.ObjectRef{ref("other", "b")}}, inv.Phases[1],
	}}, kept)
	assert.Equal(t, []apply.ObjectRef{ref("team", "a"), ref("team", "c")}, out)
}

// TestServiceAccountChoice: which ServiceAccount a pass impersonates, and where it is looked up.
func TestServiceAccountChoice(t *testing.T) {
	t.Parallel()
	r := &Applier{defaultServiceAccount: "pkgsync-default", controllerNamespace: "pkgsync-system"}
	namespaced := apply.Owner{Kind: "Package", Namespace: "team", Name: "a"}
	cluster := apply.Owner{Kind: "ClusterPackage", Name: "a"}
	assert.Equal(t, "own", r.serviceAccountFor(namespaced, "own"))
	assert.Equal(t, "pkgsync-default", r.serviceAccountFor(namespaced, ""), "a namespaced resource that names none")
	assert.Empty(t, r.serviceAccountFor(cluster, ""), "a cluster-scoped resource that names none: the controller's own identity")
	assert.Equal(t, "own", r.serviceAccountFor(cluster, "own"))
	assert.Equal(t, "team", r.serviceAccountNamespace(namespaced))
	assert.Equal(t, "pkgsync-system", r.serviceAccountNamespace(cluster))

	// A cluster-scoped resource naming a ServiceAccount needs the controller's namespace.
	r.controllerNamespace = ""
	_, err := r.Apply(t.Context(), Request{Owner: cluster, ServiceAccount: "own", Phases: []desired.Phase{{Name: "p"}}})
	var stage *reconciler.StageError
	require.ErrorAs(t, err, &stage)
	assert.Equal(t, v1alpha1.ApplyFailedReason, stage.Reason)
	assert.Contains(t, err.Error(), "--namespace")
}
