package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/test/testenv"
)

// watchNow is the time the watch goldens are drawn at.
var watchNow = time.Date(2026, 11, 25, 14, 0, 0, 0, time.UTC)

// soakingFleet is a fleet whose canary partition soaks on 2.0.0 while prod waits for its
// maintenance window, with its members as the watch reads them: one in flight, one failed,
// the rest Ready.
func soakingFleet() (*v1alpha1.HostedClusterPackage, []v1alpha1.Package) {
	fleet, status := haltedFleet(watchNow)
	fleet.UID = types.UID("fleet-uid")
	fleet.Spec.Rollout.Soak = &metav1.Duration{Duration: 30 * time.Minute}
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(watchNow.Add(d)) }
	status.Conditions[0].Reason, status.Conditions[0].Message = "RolloutProgressing", "partition canary: rolling out bbbbbbbbbbbb-22222222: 3/5/8 updated/ready/total"
	status.Conditions = status.Conditions[:1]
	status.Partitions[0].State, status.Partitions[0].LastTransitionTime = v1alpha1.PartitionSoaking, at(-12*time.Minute-30*time.Second)
	status.Partitions[0].MemberCounts = v1alpha1.MemberCounts{Total: 3, Updated: 3, Ready: 2, Failed: 1}
	status.Partitions[1].Window = &v1alpha1.FleetWindowStatus{OpensAt: &metav1.Time{Time: watchNow.Add(5*time.Hour + 30*time.Minute)}}
	status.Partitions[2].Window = &v1alpha1.FleetWindowStatus{Open: true, ClosesAt: &metav1.Time{Time: watchNow.Add(45 * time.Minute)}}
	fleet.Status = status

	owner := metav1.OwnerReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.HostedClusterPackageKind, Name: fleet.Name, UID: fleet.UID, Controller: new(true)}
	member := func(ns string, target bool, ready metav1.ConditionStatus, reason, message string) v1alpha1.Package {
		rev := status.Stable.FleetRevision
		if target {
			rev = *status.Target
		}
		p := v1alpha1.Package{
			ObjectMeta: metav1.ObjectMeta{Name: fleet.Name, Namespace: ns, Generation: 2, OwnerReferences: []metav1.OwnerReference{owner},
				Labels:      map[string]string{v1alpha1.FleetLabel: fleet.Name},
				Annotations: map[string]string{v1alpha1.FleetRevisionAnnotation: rev.Name}},
			Spec: v1alpha1.PackageSpec{Image: rev.Image},
		}
		p.Status.ObservedGeneration = 2
		p.Status.LastAttemptedRevision, p.Status.LastAttemptedVersion = rev.Digest, rev.Version
		if ready == metav1.ConditionTrue {
			p.Status.LastAppliedRevision, p.Status.LastAppliedVersion = rev.Digest, rev.Version
		}
		p.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: ready, Reason: reason, Message: message, ObservedGeneration: 2,
			LastTransitionTime: metav1.NewTime(watchNow.Add(-time.Minute))}}
		return p
	}
	members := []v1alpha1.Package{
		member("clusters-c1", true, metav1.ConditionTrue, "ReconciliationSucceeded", "applied revision sha256:bbbb"),
		member("clusters-c3", true, metav1.ConditionUnknown, "PhaseProgressing", "phase deploy: Deployment.apps clusters-c3/addon-operator: Available=False"),
		member("clusters-c2", true, metav1.ConditionFalse, "RenderFailed", "render: template config.yaml.gotmpl: this revision is broken on purpose"),
		member("clusters-p1", false, metav1.ConditionTrue, "ReconciliationSucceeded", "applied revision sha256:aaaa"),
		// A member of another fleet that carries this fleet's label is not shown.
		func() v1alpha1.Package {
			p := member("clusters-x", true, metav1.ConditionFalse, "Stray", "not a member")
			p.OwnerReferences = nil
			return p
		}(),
	}
	return fleet, members
}

// The terminal frame, drawn wide and narrow, and the plain lines, against golden files: both
// are functions of the fleet, its members, the time and the width.
func TestFleetWatchRenderings(t *testing.T) {
	t.Parallel()
	fleet, members := soakingFleet()
	for _, width := range []int{120, 60} {
		frame := renderFleetFrame(fleet, members, watchNow, width)
		assertGolden(t, filepath.Join("testdata", "fleet-watch-frame-"+strconv.Itoa(width)+".golden"), frame)
		for line := range strings.Lines(frame) {
			assert.LessOrEqual(t, len([]rune(strings.TrimSuffix(line, "\n"))), width, "line %q", line)
		}
		assert.Equal(t, frame, renderFleetFrame(fleet, members, watchNow, width), "drawn twice alike")
	}
	later := renderFleetFrame(fleet, members, watchNow.Add(time.Minute+5*time.Second), 120)
	assert.Contains(t, later, "soak ends in 16m25s", "the countdown moves with the time given")
	assert.Contains(t, later, "window opens in 5h28m55s")

	var lines []string
	for _, l := range renderFleetLines(fleet, members) {
		lines = append(lines, l.text)
	}
	assertGolden(t, filepath.Join("testdata", "fleet-watch-lines.golden"), strings.Join(lines, "\n")+"\n")
}

// Members waiting for their HostedCluster's maintenance window are marked in their partition's
// counts and listed apart, with a countdown to the window, not as in flight.
func TestFleetWatchFrameWindowHeld(t *testing.T) {
	t.Parallel()
	fleet, members := soakingFleet()
	fleet.Status.Partitions[1].WindowHeld = 1
	fleet.Status.WindowHeld = 1
	fleet.Status.WindowHeldMembers = []v1alpha1.WindowHeldMemberStatus{{
		MemberStatus: v1alpha1.MemberStatus{Namespace: "clusters-p1", Partition: "prod", Reason: v1alpha1.OutsideClusterWindowReason, Message: "HostedCluster clusters/p1: none of its maintenance windows is open"},
		OpensAt:      &metav1.Time{Time: watchNow.Add(2 * time.Hour)},
	}}
	frame := renderFleetFrame(fleet, members, watchNow, 120)
	assert.Contains(t, frame, "(1 blocked, 1 held, 1 window-held)")
	assert.Contains(t, frame, "Waiting for their cluster's window (1):\n  clusters-p1  OutsideClusterWindow: opens in 2h0m0s; HostedCluster clusters/p1: none of its maintenance windows is open\n")
	assert.NotContains(t, frame, "  clusters-p1  sha256:", "not in flight")
}

// The plain rendering prints what changed: the first state in full, then a line per change,
// and a line for a member that is gone.
func TestFleetWatchPrintsChanges(t *testing.T) {
	t.Parallel()
	fleet, members := soakingFleet()
	var out bytes.Buffer
	printed := map[string]string{}
	require.NoError(t, printChangedLines(&out, printed, renderFleetLines(fleet, members)))
	assert.Equal(t, 1+3+4, strings.Count(out.String(), "\n"), "the fleet, 3 partitions, 4 members:\n%s", out.String())

	out.Reset()
	require.NoError(t, printChangedLines(&out, printed, renderFleetLines(fleet, members)))
	assert.Empty(t, out.String(), "nothing changed")

	members[1].Status.Conditions[0].Status, members[1].Status.Conditions[0].Reason = metav1.ConditionTrue, "ReconciliationSucceeded"
	require.NoError(t, printChangedLines(&out, printed, renderFleetLines(fleet, members)))
	assert.Equal(t, "member clusters-c3: 2.0.0 (sha256:bbbbbbbb…) bbbbbbbbbbbb-22222222, Ready=True ReconciliationSucceeded: "+
		"phase deploy: Deployment.apps clusters-c3/addon-operator: Available=False\n", out.String())

	out.Reset()
	require.NoError(t, printChangedLines(&out, printed, renderFleetLines(fleet, members[1:])))
	assert.Equal(t, "member clusters-c1: removed\n", out.String())
}

func TestProgressBar(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		c    v1alpha1.MemberCounts
		want string
	}{
		{v1alpha1.MemberCounts{}, "[          ]"},
		{v1alpha1.MemberCounts{Total: 4}, "[..........]"},
		{v1alpha1.MemberCounts{Total: 4, Updated: 4, Ready: 4}, "[##########]"},
		{v1alpha1.MemberCounts{Total: 4, Updated: 2, Failed: 1}, "[##xxx.....]"},
		{v1alpha1.MemberCounts{Total: 1000, Updated: 1, Blocked: 1}, "[#........!]"},
		{v1alpha1.MemberCounts{Total: 3, Updated: 3, Blocked: 3}, "[##########]"},
		{v1alpha1.MemberCounts{Total: 4, Blocked: 1, Held: 1}, "[.....!!!!!]"},
		{v1alpha1.MemberCounts{Total: 4, Updated: 2, WindowHeld: 2}, "[#####!!!!!]"},
	} {
		assert.Equal(t, tc.want, progressBar(tc.c, 10), "%+v", tc.c)
	}
}

// syncBuffer is a bytes.Buffer the command writes to while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// `fleet status --watch` against a real API server, writing to a pipe rather than a terminal:
// a change of a member's status is a new line, from the watch, within the deadline; the
// command ends when its context does.
func TestFleetWatchCommand(t *testing.T) {
	t.Parallel()
	cp := testenv.NewControlPlane(t, "fleet-watch")
	_, err := envtest.InstallCRDs(cp.Config, envtest.CRDInstallOptions{Paths: []string{
		filepath.Join("..", "..", "config", "crd", "bases", "pkgsync.dev_hostedclusterpackages.yaml"),
		filepath.Join("..", "..", "config", "crd", "bases", "pkgsync.dev_packages.yaml"),
	}})
	require.NoError(t, err)
	scheme := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	require.NoError(t, corev1.AddToScheme(scheme))
	c, err := client.New(cp.Config, client.Options{Scheme: scheme})
	require.NoError(t, err)
	ctx := t.Context()

	fleet, members := soakingFleet()
	status := fleet.Status
	fleet.UID = ""
	require.NoError(t, c.Create(ctx, fleet))
	fleet.Status = status
	fleet.Status.ObservedGeneration = fleet.Generation
	require.NoError(t, c.Status().Update(ctx, fleet))
	member := members[1] // clusters-c3, in flight
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: member.Namespace}}))
	memberStatus := member.Status
	member.OwnerReferences[0].UID = fleet.UID
	require.NoError(t, c.Create(ctx, &member))
	member.Status = memberStatus
	member.Status.ObservedGeneration = member.Generation
	member.Status.Conditions[0].ObservedGeneration = member.Generation
	require.NoError(t, c.Status().Update(ctx, &member))

	cmdCtx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	var stdout, stderr syncBuffer
	cmd := newRootCmd()
	cmd.SetArgs([]string{"fleet", "status", fleet.Name, "--watch", "--kubeconfig", cp.KubeconfigPath})
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(cmdCtx) }()

	const deadline, interval = 30 * time.Second, 50 * time.Millisecond
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Contains(c, stdout.String(), "member clusters-c3: 2.0.0 (sha256:bbbbbbbb…) bbbbbbbbbbbb-22222222, Ready=Unknown PhaseProgressing")
	}, deadline, interval, "the first state")
	require.Contains(t, stdout.String(), "fleet hosted-addon: target 2.0.0 (sha256:bbbbbbbb…) bbbbbbbbbbbb-22222222")
	require.Contains(t, stdout.String(), "partition canary: Soaking, 3/2/3 (1 failed) updated/ready/total, soak ends at ")

	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(&member), &member))
	member.Status.Conditions[0].Status, member.Status.Conditions[0].Reason = metav1.ConditionTrue, "ReconciliationSucceeded"
	member.Status.Conditions[0].Message = "applied revision " + member.Status.LastAttemptedRevision
	member.Status.LastAppliedRevision, member.Status.LastAppliedVersion = member.Status.LastAttemptedRevision, member.Status.LastAttemptedVersion
	require.NoError(t, c.Status().Update(ctx, &member))
	want := "member clusters-c3: 2.0.0 (sha256:bbbbbbbb…) bbbbbbbbbbbb-22222222, Ready=True ReconciliationSucceeded: applied revision sha256:bbbb"
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Contains(c, stdout.String(), want)
	}, deadline, interval, "the member's change")
	assert.Equal(t, 1, strings.Count(stdout.String(), "fleet hosted-addon:"), "the fleet did not change: no new line for it\n%s", stdout.String())

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(deadline):
		t.Fatal("the command did not end with its context")
	}

	// On a terminal the frame is drawn in place, at once and then at each tick (the
	// countdowns), from the watch's cache.
	termCtx, stopTerm := context.WithCancel(ctx)
	t.Cleanup(stopTerm)
	var screen syncBuffer
	go func() {
		done <- followFleetOn(termCtx, cp.Config, scheme, fleet.Name, fleetWatchOutput{w: &screen, width: func() int { return 100 }})
	}()
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.GreaterOrEqual(c, strings.Count(screen.String(), "\x1b[H"), 3, "the first frame and two ticks")
	}, deadline, interval)
	frame := screen.String()
	assert.True(t, strings.HasPrefix(frame, "\x1b[H\x1b[2J\x1b[HFleet hosted-addon  (watching; Ctrl-C stops)\x1b[K\n"), "%q", frame[:min(len(frame), 200)])
	assert.Contains(t, frame, "canary       [###########################xxxxxxxxxxxxx] Soaking     3/2/3 (1 failed)")
	assert.Contains(t, frame, "soak ends in 0s", "the soak of the fixture ended before this test ran")
	assert.Contains(t, frame, "In flight: none", "clusters-c3 is Ready on its revision now")
	stopTerm()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(deadline):
		t.Fatal("the terminal watch did not end with its context")
	}
}

func TestInPlace(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "\x1b[Ha\x1b[K\nb\x1b[K\n\x1b[J", inPlace("a\nb\n"))
}

// A member of a fleet with deletionPolicy Orphan has no ownerReference to it: the fleet's UID,
// annotated, makes it the fleet's; a labelled Package with another UID is not shown.
func TestFleetWatchMembersWithoutOwnerReference(t *testing.T) {
	t.Parallel()
	fleet, members := soakingFleet()
	orphanable, forged := members[0], members[1]
	orphanable.OwnerReferences = nil
	orphanable.Annotations[v1alpha1.FleetUIDAnnotation] = string(fleet.UID)
	forged.OwnerReferences = nil
	forged.Annotations[v1alpha1.FleetUIDAnnotation] = "guessed"
	v := newFleetView(fleet, []v1alpha1.Package{orphanable, forged})
	if assert.Len(t, v.members, 1) {
		assert.Equal(t, orphanable.Namespace, v.members[0].Namespace)
	}
}
