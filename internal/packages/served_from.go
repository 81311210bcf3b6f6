package packages

import (
	"context"
	"fmt"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/source"
)

// servedFrom names the registry and repository that serve ref's content to creds when that is
// not ref's own (a mirror or an override), else "". The render step proved the access, so this
// costs no request.
func (r *packageSteps[T]) servedFrom(ctx context.Context, src *source.Client, ref source.Reference, creds source.Credentials) string {
	loc, err := src.Locate(ctx, ref, creds)
	if err != nil || loc.Name() == ref.Name() {
		return ""
	}
	return loc.Name()
}

// appliedMessage is the Ready message of a Package whose revision is applied: it names the
// mirror that served it, if one did.
func appliedMessage(status *v1alpha1.PackageStatus) string {
	if status.LastAppliedFrom != "" {
		return fmt.Sprintf("applied revision %s from %s", status.LastAppliedRevision, status.LastAppliedFrom)
	}
	return fmt.Sprintf("applied revision %s", status.LastAppliedRevision)
}
