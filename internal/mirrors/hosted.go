package mirrors

import (
	"slices"

	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/source"
)

// OfHostedCluster are the mirrors of the HostedCluster behind a resource's namespace
// (spec.imageContentSources), for that resource's reads alone: HyperShift makes digest mirrors
// of them (ImageDigestMirrorSets in the hosted cluster, without mirrorSourcePolicy), and so does
// pkgsync, tried after the management cluster's own mirror sets and before the source. An entry
// pkgsync cannot follow (a source or mirror that is not REGISTRY[/REPOSITORY], *.domain for a
// source) is left out, as in mirror sets. Nil without a HostedCluster.
func OfHostedCluster(hc *hosted.HostedCluster) []source.MirrorSet {
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
