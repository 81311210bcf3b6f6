package main

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	fleets "pkgsync.dev/pkgsync/internal/fleet"
	"pkgsync.dev/pkgsync/render"
)

// TestFleetPlanOutput: members are listed partition by partition in rollout order, each with
// what the revision would do to it; a failed render is a failure with its reason, and counted.
// (The dry run against a real API server is in test/e2e, TestFleetPreflight.)
func TestFleetPlanOutput(t *testing.T) {
	t.Parallel()
	rendered := &render.Result{}
	pre := &fleets.Preflight{
		Revision:   "9b07d4c21e5f-8e41c0d2",
		Partitions: []string{"canary", "prod", ""},
		Members: []fleets.PreflightMember{
			{Namespace: "clusters-p1", Partition: "prod", HostedCluster: "clusters/p1", Revision: "c4a2f9d01b6e-8e41c0d2",
				Reason: v1alpha1.RenderFailedReason, Message: "config.yaml.gotmpl:8: error calling fail:\n  not on this cluster"},
			{Namespace: "clusters-c1", Partition: "canary", HostedCluster: "clusters/c1", Revision: "c4a2f9d01b6e-8e41c0d2", Result: rendered},
			{Namespace: "clusters-p2", Partition: "prod", HostedCluster: "clusters/p2", Revision: "9b07d4c21e5f-8e41c0d2", Result: rendered},
			{Namespace: "clusters-x", Partition: "", HostedCluster: "clusters/x", Result: rendered},
		},
		Collisions: []v1alpha1.MemberStatus{{Namespace: "clusters-y", Reason: v1alpha1.CollisionReason, Message: "Package clusters-y/addon exists and is not this fleet's"}},
	}
	out := fleetPlanOf(t.Context(), nil, "addon", "registry.example.com/addon:1.2.0@sha256:9b07d4c21e5f", pre)
	assert.Equal(t, 1, out.Fails)
	require.Len(t, out.Partitions, 3)
	assert.Equal(t, planMoves, out.Partitions[0].Members[0].Result)
	assert.Equal(t, planFails, out.Partitions[1].Members[0].Result)
	assert.Equal(t, planUnchanged, out.Partitions[1].Members[1].Result)
	assert.Equal(t, planCreates, out.Partitions[2].Members[0].Result)

	var buf bytes.Buffer
	require.NoError(t, printFleetPlan(&buf, out, false))
	assertGolden(t, filepath.Join("testdata", "fleet-plan.golden"), buf.String())
}
