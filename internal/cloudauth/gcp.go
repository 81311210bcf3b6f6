package cloudauth

import (
	"context"
	"net/http"

	fluxgcp "github.com/fluxcd/pkg/auth/gcp"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
	"golang.org/x/oauth2/google/externalaccount"
	"google.golang.org/api/container/v1"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

func gcpProvider(hc *http.Client) *provider {
	return &provider{
		name:         v1alpha1.RegistryProviderGCP,
		p:            fluxgcp.Provider{Implementation: gcpSDK{http: hc}},
		registries:   "a Google Artifact Registry or Container Registry",
		registryForm: "LOCATION-docker.pkg.dev, or gcr.io",
		annotationHint: "iam.gke.io/gcp-service-account: NAME@PROJECT.iam.gserviceaccount.com (on GKE), or also " +
			"gcp.auth.fluxcd.io/workload-identity-provider: projects/NUMBER/locations/global/workloadIdentityPools/POOL/providers/PROVIDER",
		roleHint: "the Google service account needs roles/iam.workloadIdentityUser for " +
			"serviceAccount:PROJECT.svc.id.goog[%s/%s] (or the pool's principal); docs/operations.md, Google Artifact Registry",
		registryHint: "the Google service account needs roles/artifactregistry.reader on the repository",
		ambientHint:  "Google credentials of this machine: gcloud auth application-default login, or GOOGLE_APPLICATION_CREDENTIALS",
		controllerHint: "give the controller's pod an identity: GKE Workload Identity (iam.gke.io/gcp-service-account on its " +
			"ServiceAccount) or GOOGLE_APPLICATION_CREDENTIALS, or name a ServiceAccount in spec.serviceAccountName",
	}
}

// gcpSDK is fluxcd/pkg/auth's GCP Implementation with every request through the Exchanger's
// bounded client (newHTTPClient), which the oauth2 package takes from the context. The endpoints
// are the SDK's own: the metadata server at GCE_METADATA_HOST (cloud.google.com/go/compute/metadata
// reads it), sts.googleapis.com and iamcredentials.googleapis.com (reached through HTTPS_PROXY
// where the machine has one).
type gcpSDK struct{ http *http.Client }

func (g gcpSDK) DefaultTokenSource(ctx context.Context, scope ...string) (oauth2.TokenSource, error) {
	return google.DefaultTokenSource(context.WithValue(ctx, oauth2.HTTPClient, g.http), scope...)
}

func (g gcpSDK) NewTokenSource(ctx context.Context, conf externalaccount.Config) (oauth2.TokenSource, error) {
	return externalaccount.NewTokenSource(context.WithValue(ctx, oauth2.HTTPClient, g.http), conf)
}

// GetCluster serves the library's GKE cluster access, which pkgsync does not use.
func (gcpSDK) GetCluster(context.Context, string, *container.Service) (*container.Cluster, error) {
	return nil, errNotUsed
}
