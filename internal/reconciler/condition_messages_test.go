package reconciler

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// TestStatusPatchBoundsConditionMessages: a failure whose message holds attacker-sized text
// (here 64 KiB, half of it multi-byte) is written cut to the bound, valid UTF-8, so that the
// API server (which refuses messages over 32768 bytes) takes the status write.
func TestStatusPatchBoundsConditionMessages(t *testing.T) {
	t.Parallel()
	scheme := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	pkg := &v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(pkg).WithStatusSubresource(pkg).Build()

	p := newStatusPatcher(pkg, c)
	huge := strings.Repeat("é", 16<<10) + strings.Repeat("x", 32<<10)
	conditions.MarkFalse(pkg, meta.ReadyCondition, v1alpha1.VerificationFailedReason, "%s", huge)
	require.NoError(t, p.patch(t.Context(), pkg))

	var got v1alpha1.Package
	require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(pkg), &got))
	msg := conditions.GetMessage(&got, meta.ReadyCondition)
	assert.LessOrEqual(t, len(msg), maxConditionMessage)
	assert.True(t, utf8.ValidString(msg))
	assert.True(t, strings.HasPrefix(msg, "éé"))
	assert.Contains(t, msg, "more bytes left out")
}

// TestConditionMessagesPrintable: error text a registry chose reaches status and events without
// the characters a terminal acts on: an ANSI sequence that rewrites the line `kubectl describe`
// shows, a carriage return that overprints it, text reordered by bidirectional overrides.
func TestConditionMessagesPrintable(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want string }{
		{"manifest unknown", "manifest unknown"},
		{"two errors:\n\tfirst\n\tsecond", "two errors:\n\tfirst\n\tsecond"},
		{"denied\x1b[2K\x1b[1GReady: True", "denied\uFFFD[2K\uFFFD[1GReady: True"},
		{"denied\rReady: True", "denied\uFFFDReady: True"},
		{"abc\u202edcba", "abc\uFFFDdcba"},
		{"bad \xff byte", "bad \uFFFD byte"},
		{"\u0085next line", "\uFFFDnext line"},
	} {
		pkg := &v1alpha1.Package{}
		conditions.MarkFalse(pkg, meta.ReadyCondition, v1alpha1.PullFailedReason, "%s", tt.in)
		boundConditionMessages(pkg)
		assert.Equal(t, tt.want, conditions.GetMessage(pkg, meta.ReadyCondition), "%q", tt.in)
	}
}
