package cloudauth

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/test/cloudstandin"
)

type gcpEnv struct {
	gcp      *cloudstandin.GCP
	accounts *fakeAccounts
	ex       *Exchanger
}

// newGCPEnv starts the GCP stand-ins (the metadata server at GCE_METADATA_HOST; STS, IAM
// credentials and Artifact Registry through HTTPS_PROXY) with two tenants' Google service
// accounts.
func newGCPEnv(t *testing.T, controller string) *gcpEnv {
	env := cloudstandin.NewEnv(t)
	g := env.GCP(t, "127.0.0.1:1", fakeVerify, controller)
	g.AddServiceAccount(cloudstandin.GoogleServiceAccount{Email: g.Email("tenant-a"), Members: []string{"a/puller"}, Repositories: []string{"team-a"}})
	g.AddServiceAccount(cloudstandin.GoogleServiceAccount{Email: g.Email("tenant-b"), Members: []string{"b/puller"}, Repositories: []string{"team-b"}})
	setGCPEnv(t, g.MetadataHost, env.Proxy.URL)
	accounts := &fakeAccounts{}
	accounts.add("a", "puller", map[string]string{"iam.gke.io/gcp-service-account": g.Email("tenant-a")})
	accounts.add("b", "puller", map[string]string{"iam.gke.io/gcp-service-account": g.Email("tenant-b")})
	ex, err := New(Options{ServiceAccounts: accounts, CABundle: env.CA.PEM})
	require.NoError(t, err)
	return &gcpEnv{gcp: g, accounts: accounts, ex: ex}
}

func setGCPEnv(t *testing.T, metadataHost, proxy string) {
	t.Setenv("GCE_METADATA_HOST", metadataHost)
	t.Setenv("HTTPS_PROXY", proxy)
	t.Setenv("NO_PROXY", "")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "")
	t.Setenv("CLOUDSDK_CONFIG", t.TempDir())
}

func (e *gcpEnv) credential(t *testing.T, id Identity) (string, string, error) {
	creds, err := e.ex.Credentials(v1alpha1.RegistryProviderGCP, id)
	require.NoError(t, err)
	c, err := creds(t.Context(), e.gcp.RegistryHost)
	return c.Username, c.Password, err
}

// A ServiceAccount acting as its Google service account (GKE Workload Identity: STS, then
// generateAccessToken) reads its repositories only; another namespace's ServiceAccount naming
// the first tenant's Google service account is refused by IAM.
func TestGCPObjectLevelIdentity(t *testing.T) {
	e := newGCPEnv(t, "")
	user, pass, err := e.credential(t, Identity{Namespace: "a", ServiceAccount: "puller"})
	require.NoError(t, err)
	assert.Equal(t, "oauth2accesstoken", user)
	status, msg := e.gcp.Authorize(user, pass, e.gcp.Project+"/team-a/addon")
	assert.Equal(t, 200, status, msg)
	status, _ = e.gcp.Authorize(user, pass, e.gcp.Project+"/team-b/addon")
	assert.Equal(t, 403, status)

	e.accounts.add("b", "thief", map[string]string{"iam.gke.io/gcp-service-account": e.gcp.Email("tenant-a")})
	_, _, err = e.credential(t, Identity{Namespace: "b", ServiceAccount: "thief"})
	var xerr *Error
	require.ErrorAs(t, err, &xerr)
	assert.Equal(t, StepRoleAssumption, xerr.Step)
	assert.Contains(t, err.Error(), "iam.serviceAccounts.getAccessToken")
	assert.Contains(t, err.Error(), "roles/iam.workloadIdentityUser")
	for _, s := range e.gcp.Issued() {
		assert.NotContains(t, err.Error(), s)
	}
}

// The controller's own identity: the metadata server's default token (GKE Workload Identity
// of its pod).
func TestGCPControllerIdentity(t *testing.T) {
	const controller = "controller@platform-prod.iam.gserviceaccount.com"
	e2 := newGCPEnv(t, controller)
	e2.gcp.AddServiceAccount(cloudstandin.GoogleServiceAccount{Email: controller, Repositories: []string{"platform"}})
	user, pass, err := e2.credential(t, Identity{})
	require.NoError(t, err)
	status, msg := e2.gcp.Authorize(user, pass, e2.gcp.Project+"/platform/addon")
	assert.Equal(t, 200, status, msg)
	status, _ = e2.gcp.Authorize(user, pass, e2.gcp.Project+"/team-a/addon")
	assert.Equal(t, 403, status)
}
