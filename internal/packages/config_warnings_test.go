package packages

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/client-go/tools/record"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/render"
)

// A configuration key the package's schema does not declare is dropped without failing the
// Package, and said: a line in status.warnings and a Warning event, once per change rather than
// once per pass.
func TestConfigWarningsReported(t *testing.T) {
	t.Parallel()
	typo := render.Warning{Field: "config.replica", Message: "config.replica is not in the package's configuration schema and is dropped; did you mean replicas?"}
	rec := record.NewFakeRecorder(10)
	pkg := &v1alpha1.Package{}

	reportWarnings(rec, pkg, []render.Warning{typo})
	assert.Equal(t, []string{typo.Message}, pkg.Status.Warnings)
	assert.Equal(t, []string{"Warning ConfigPruned " + typo.Message}, drain(rec))

	reportWarnings(rec, pkg, []render.Warning{typo})
	assert.Empty(t, drain(rec), "the same warnings again: no new event")

	reportWarnings(rec, pkg, nil)
	assert.Nil(t, pkg.Status.Warnings, "the key fixed: the line goes")
	assert.Empty(t, drain(rec))

	many := make([]render.Warning, 40)
	for i := range many {
		many[i] = render.Warning{Message: strings.Repeat("x", 2000)}
	}
	reportWarnings(rec, pkg, many)
	assert.Len(t, pkg.Status.Warnings, v1alpha1.MaxStatusWarnings)
	assert.Equal(t, "and 25 more", pkg.Status.Warnings[v1alpha1.MaxStatusWarnings-1])
	assert.LessOrEqual(t, len(pkg.Status.Warnings[0]), v1alpha1.MaxStatusWarningLength)
	assert.Len(t, drain(rec), 1)
}

// drain returns the events recorded so far.
func drain(rec *record.FakeRecorder) []string {
	var events []string
	for {
		select {
		case e := <-rec.Events:
			events = append(events, e)
		default:
			return events
		}
	}
}
