package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pkgsync.dev/pkgsync/api/v1alpha1"
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

// TestTargetAppliedFrom: the fleet lists where the members that applied the target read it,
// once each, sorted; members on another revision, or not yet applied, do not count.
func TestTargetAppliedFrom(t *testing.T) {
	t.Parallel()
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	member := func(revision, applied, from string) *fleetMember {
		p := &v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{v1alpha1.FleetRevisionAnnotation: revision}}}
		p.Spec.Image = "quay.io/team/app:v1@" + digest
		p.Status.LastAppliedRevision, p.Status.LastAppliedFrom = applied, from
		return &fleetMember{pkg: p}
	}
	members := []*fleetMember{
		member("target", digest, "z.example.com/team/app"),
		member("target", digest, "a.example.com/team/app"),
		member("target", digest, "a.example.com/team/app"),
		member("target", digest, ""),
		member("target", "sha256:old", "old.example.com/team/app"),
		member("stable", digest, "stable.example.com/team/app"),
		{},
	}
	assert.Equal(t, []string{"a.example.com/team/app", "z.example.com/team/app"}, targetAppliedFrom(members, "target"))
	assert.Empty(t, targetAppliedFrom(members[3:4], "target"))
}
