package packages

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/reconciler"
)

// The attack of issue 41 (hole 1): a tenant's readyExpr matches a 64 KiB annotation of its own
// Package against itself. Go's regexp cannot be interrupted, and cel-go counted the cost of
// matches only after it returned (22 s an evaluation). The call is now priced before it runs
// and refused: the check ends with InvalidDependency, not by the deadline.
func TestReadyExprSelfMatchIsRefused(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x?", 32<<10) + "y" // no literal fast path, no early match

	self := depPackage("me", false, v1alpha1.Dependency{Name: "a",
		ReadyExpr: "self.metadata.annotations['pkgsync.dev/hold'].matches(self.metadata.annotations['pkgsync.dev/hold'])"})
	self.Annotations = map[string]string{"pkgsync.dev/hold": long}
	d := &dependencies{reader: dependencyClient(t, depPackage("a", true)), exprs: newReadyExprs()}
	// A deadline far above the bound of one evaluation: before the fix, the regexp ran past it.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := d.check(ctx, self, v1alpha1.PackageKind)
	require.Error(t, err)
	assert.Equal(t, v1alpha1.InvalidDependencyReason, reconciler.ReasonFor(err))
	assert.NotContains(t, err.Error(), "stopped", "the evaluation is refused, not stopped by the deadline")
	assert.NotContains(t, err.Error(), "x?x?", "the error names no runtime value")

	// Many cheaper calls stop at the cost limit instead.
	self.Spec.DependsOn[0].ReadyExpr = "[1,2,3,4,5,6,7,8,9,10].all(i, [1,2,3,4,5,6,7,8,9,10].all(j, !self.metadata.annotations['pkgsync.dev/hold'].matches('(a|b)*c')))"
	self.Annotations["pkgsync.dev/hold"] = strings.Repeat("ab", 10_000)
	err = d.check(ctx, self, v1alpha1.PackageKind)
	require.Error(t, err)
	assert.Equal(t, v1alpha1.InvalidDependencyReason, reconciler.ReasonFor(err))
	assert.Contains(t, err.Error(), "cost")
}

// Issue 41 (hole 2): what a readyExpr sees of another installation is an allow-list. A
// ClusterPackage created with kubectl apply carries its whole spec, configuration included, in
// kubectl's last-applied annotation; a tenant's readyExpr read it bit by bit with boolean
// expressions, or quoted in an error (a pattern that does not compile), and guessed a
// low-entropy configuration offline from status.lastAppliedConfigDigest.
func TestReadyExprSeesAnAllowList(t *testing.T) {
	t.Parallel()
	const secret = "db-password-hunter2"
	cp := depClusterPackage("platform", true)
	cp.Annotations = map[string]string{
		"kubectl.kubernetes.io/last-applied-configuration": `{"spec":{"config":{"password":"` + secret + `"}}}`,
		"pkgsync.dev/fleet-revision":                       "stable",
	}
	cp.Status.LastAppliedConfigDigest = "sha256:0123"
	cp.Status.Conditions[0].Message = "rendered with " + secret
	cp.Status.LastAppliedRevision = "sha256:abcd"
	cp.Status.LastAppliedVersion = "1.2.3"

	ready := func(expr string) error {
		self := depPackage("me", false, v1alpha1.Dependency{Kind: v1alpha1.ClusterPackageKind, Name: "platform", ReadyExpr: expr})
		self.Annotations = map[string]string{"example.com/note": secret}
		d := &dependencies{reader: dependencyClient(t, cp), exprs: newReadyExprs()}
		return d.check(t.Context(), self, v1alpha1.PackageKind)
	}
	for _, expr := range []string{
		`dep.metadata.annotations['kubectl.kubernetes.io/last-applied-configuration'].contains('hunter2')`,
		`dep.metadata.annotations.exists(k, dep.metadata.annotations[k].contains('hunter2'))`,
		`has(dep.status.lastAppliedConfigDigest)`,
		`dep.metadata.annotations['pkgsync.dev/desired-hash'] != ''`,
		`dep.status.conditions.exists(c, has(c.message) && c.message.contains('hunter2'))`,
		`has(dep.spec)`,
		`self.metadata.annotations['example.com/note'].contains('hunter2')`,
	} {
		err := ready(expr)
		require.Error(t, err, "%s must not see the value", expr)
		var de *dependencyError
		require.ErrorAs(t, err, &de)
		assert.Equal(t, v1alpha1.DependencyNotReadyReason, de.reason, expr)
	}
	// A pattern made of the value, or a conversion of it: the error says what failed, not on what.
	for _, expr := range []string{
		`'x'.matches(dep.metadata.annotations['pkgsync.dev/fleet-revision'] + '(')`,
		`timestamp(dep.metadata.annotations['pkgsync.dev/fleet-revision']) > timestamp('2020-01-01T00:00:00Z')`,
		`int(dep.metadata.annotations['pkgsync.dev/fleet-revision']) > 0`,
	} {
		err := ready(expr)
		require.Error(t, err, expr)
		assert.Equal(t, v1alpha1.InvalidDependencyReason, reconciler.ReasonFor(err), expr)
		assert.NotContains(t, err.Error(), "stable", expr)
	}
	// What the allow-list keeps.
	for _, expr := range []string{
		`dep.metadata.name == 'platform' && dep.metadata.generation == 1`,
		`dep.metadata.annotations['pkgsync.dev/fleet-revision'] == 'stable'`,
		`dep.status.observedGeneration == 1 && dep.status.conditions.exists(c, c.type == 'Ready' && c.status == 'True' && c.reason == 'R')`,
		`dep.status.lastAppliedRevision == 'sha256:abcd' && dep.status.lastAppliedTag == 'v1' && dep.status.lastAppliedVersion == '1.2.3'`,
		`self.metadata.name == 'me' && self.metadata.namespace == 'ns'`,
	} {
		assert.NoError(t, ready(expr), expr)
	}
}
