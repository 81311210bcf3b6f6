package reconciler

import (
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/assert"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// TestRequestAge: a pending reconcile request takes a resolution made after it; one handled
// before, or none, leaves the kind's own rule.
func TestRequestAge(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	token := now.Add(-3 * time.Second).Format(time.RFC3339Nano)
	obj := func(token string) *v1alpha1.HostedClusterPackage {
		f := &v1alpha1.HostedClusterPackage{}
		if token != "" {
			f.Annotations = map[string]string{meta.ReconcileRequestAnnotation: token}
		}
		return f
	}
	cases := []struct {
		name        string
		token, last string
		age         time.Duration
		pending     bool
	}{
		{"no request", "", "", 0, false},
		{"handled before", token, token, 0, false},
		{"pending", token, "earlier", 3 * time.Second, true},
		{"not a time", "now", "", 0, true},
		{"from the future", now.Add(time.Minute).Format(time.RFC3339Nano), "", 0, true},
	}
	for _, c := range cases {
		age, pending := RequestAge(obj(c.token), c.last, now)
		assert.Equal(t, c.pending, pending, c.name)
		assert.Equal(t, c.age, age, c.name)
	}
}
