package mirrors

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/source"
)

// TestHostedMirrors: a HostedCluster's imageContentSources become digest mirror sets, without
// the entries pkgsync cannot follow; no HostedCluster, no mirrors.
func TestHostedMirrors(t *testing.T) {
	t.Parallel()
	assert.Nil(t, OfHostedCluster(nil))
	hc := &hosted.HostedCluster{ImageContentSources: []hosted.ImageContentSource{
		{Source: "quay.io/team", Mirrors: []string{"mirror.example.com/team"}},
		{Source: "*.example.com", Mirrors: []string{"mirror.example.com/ex"}},
		{Source: "quay.io/bad", Mirrors: []string{"mirror.example.com/x:v1"}},
		{Source: "not a source", Mirrors: []string{"mirror.example.com/y"}},
	}}
	assert.Equal(t, []source.MirrorSet{
		{Source: "quay.io/team", Mirrors: []string{"mirror.example.com/team"}},
		{Source: "*.example.com", Mirrors: []string{"mirror.example.com/ex"}},
	}, OfHostedCluster(hc))
}
