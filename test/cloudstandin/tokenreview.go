package cloudstandin

import (
	"context"
	"fmt"
	"slices"

	authenticationv1 "k8s.io/api/authentication/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TokenReviewer verifies ServiceAccount tokens with the API server that issued them (a
// TokenReview for the audience): what a cloud does with the cluster's OIDC discovery document
// and keys.
func TokenReviewer(c client.Client) VerifyToken {
	return func(ctx context.Context, token, audience string) (string, error) {
		review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{audience}}}
		if err := c.Create(ctx, review); err != nil {
			return "", err
		}
		if !review.Status.Authenticated {
			return "", fmt.Errorf("not authenticated: %s", review.Status.Error)
		}
		if !slices.Contains(review.Status.Audiences, audience) {
			return "", fmt.Errorf("audience %s not in the token's %v", audience, review.Status.Audiences)
		}
		return review.Status.User.Username, nil
	}
}
