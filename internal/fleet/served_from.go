package fleet

import (
	"slices"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/fleet/rollout"
	"pkgsync.dev/pkgsync/source"
)

// targetAppliedFrom lists, sorted and without repeats, the registries and repositories
// (REGISTRY/REPOSITORY) that served the target revision to the members that applied it, when
// not where the template's image names it (their status.lastAppliedFrom); at most
// maxListedMembers.
func targetAppliedFrom(members []*rollout.Member, target string) []string {
	var out []string
	for _, m := range members {
		if m.Pkg == nil || m.Revision() != target {
			continue
		}
		st := &m.Pkg.Status
		if from := st.LastAppliedFrom; from != "" && !slices.Contains(out, from) && memberApplied(st, m.Pkg.Spec.Image) {
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
