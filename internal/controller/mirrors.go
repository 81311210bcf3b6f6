package controller

import (
	"slices"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/source"
)

// relocateImage returns the rewrite of the .images templates see, or nil without overrides.
func (o Options) relocateImage() func(string) string {
	if o.ImageOverrides.IsZero() {
		return nil
	}
	return o.ImageOverrides.Image
}

// hostedMirrors are the mirrors of the HostedCluster behind a resource's namespace
// (spec.imageContentSources), for that resource's reads alone: HyperShift makes digest mirrors
// of them (ImageDigestMirrorSets in the hosted cluster, without mirrorSourcePolicy), and so does
// pkgsync, tried after the management cluster's own mirror sets and before the source. An entry
// pkgsync cannot follow (a source or mirror that is not REGISTRY[/REPOSITORY], *.domain for a
// source) is left out, as in mirror sets. Nil without a HostedCluster.
func hostedMirrors(hc *hosted.HostedCluster) []source.MirrorSet {
	if hc == nil {
		return nil
	}
	var out []source.MirrorSet
	for _, ics := range hc.ImageContentSources {
		set := source.MirrorSet{Source: ics.Source, Mirrors: slices.Clone(ics.Mirrors)}
		if (source.MirrorSets{Digest: []source.MirrorSet{set}}).Validate() != nil {
			continue
		}
		out = append(out, set)
	}
	return out
}

// targetAppliedFrom lists, sorted and without repeats, the registries and repositories
// (REGISTRY/REPOSITORY) that served the target revision to the members that applied it, when
// not where the template's image names it (their status.lastAppliedFrom); at most
// maxListedMembers.
func targetAppliedFrom(members []*fleetMember, target string) []string {
	var out []string
	for _, m := range members {
		if m.pkg == nil || m.revision() != target {
			continue
		}
		st := &m.pkg.Status
		if from := st.LastAppliedFrom; from != "" && !slices.Contains(out, from) && memberApplied(st, m.pkg.Spec.Image) {
			out = append(out, from)
		}
	}
	slices.Sort(out)
	if len(out) > maxListedMembers {
		out = out[:maxListedMembers]
	}
	return out
}

// memberApplied tells whether a member's last complete revision is the digest image pins.
func memberApplied(st *v1alpha1.PackageStatus, image string) bool {
	ref, err := source.ParseReference(image)
	return err == nil && ref.Digest != "" && st.LastAppliedRevision == ref.Digest
}
