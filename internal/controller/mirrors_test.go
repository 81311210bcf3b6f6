package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/render"
	"pkgsync.dev/pkgsync/source"
)

// TestRenderKeyWithOverrides: the .images rewrite of --registry-host-overrides leaves render
// keys apart. A func field that failed to marshal once made every key the same, sharing one
// namespace's render with every other.
func TestRenderKeyWithOverrides(t *testing.T) {
	t.Parallel()
	o := Options{ImageOverrides: source.Overrides{Hosts: map[string]string{"quay.io": "mirror.example.com"}}}
	relocate := o.relocateImage()
	assert.Equal(t, "mirror.example.com/team/app@sha256:x", relocate("quay.io/team/app@sha256:x"))
	assert.Nil(t, Options{}.relocateImage())

	in := render.Inputs{Package: true}
	a := renderKey("r/p@sha256:a", "c", in, render.Options{Namespace: "a", RelocateImage: relocate})
	b := renderKey("r/p@sha256:a", "c", in, render.Options{Namespace: "b", RelocateImage: relocate})
	assert.NotEqual(t, a, b)
}

// TestHostedMirrors: a HostedCluster's imageContentSources become digest mirror sets, without
// the entries pkgsync cannot follow; no HostedCluster, no mirrors.
func TestHostedMirrors(t *testing.T) {
	t.Parallel()
	assert.Nil(t, hostedMirrors(nil))
	hc := &hosted.HostedCluster{ImageContentSources: []hosted.ImageContentSource{
		{Source: "quay.io/team", Mirrors: []string{"mirror.example.com/team"}},
		{Source: "*.example.com", Mirrors: []string{"mirror.example.com/ex"}},
		{Source: "quay.io/bad", Mirrors: []string{"mirror.example.com/x:v1"}},
		{Source: "not a source", Mirrors: []string{"mirror.example.com/y"}},
	}}
	assert.Equal(t, []source.MirrorSet{
		{Source: "quay.io/team", Mirrors: []string{"mirror.example.com/team"}},
		{Source: "*.example.com", Mirrors: []string{"mirror.example.com/ex"}},
	}, hostedMirrors(hc))
}
