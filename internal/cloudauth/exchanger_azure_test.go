package cloudauth

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/test/cloudstandin"
)

const (
	azureTenant = "11111111-1111-1111-1111-111111111111"
	clientA     = "aaaaaaaa-0000-0000-0000-000000000001"
	clientB     = "bbbbbbbb-0000-0000-0000-000000000002"
)

type azureEnv struct {
	azure    *cloudstandin.Azure
	accounts *fakeAccounts
	ex       *Exchanger
}

// newAzureEnv starts the Azure stand-ins (Azure AD at AZURE_AUTHORITY_HOST, the registry and
// its /oauth2/exchange through HTTPS_PROXY) with two tenants' identities.
func newAzureEnv(t *testing.T) *azureEnv {
	env := cloudstandin.NewEnv(t)
	a := env.Azure(t, "127.0.0.1:1", fakeVerify)
	a.AddIdentity(cloudstandin.Identity{TenantID: azureTenant, ClientID: clientA, Subject: "system:serviceaccount:a:puller", Repositories: []string{"team-a"}})
	a.AddIdentity(cloudstandin.Identity{TenantID: azureTenant, ClientID: clientB, Subject: "system:serviceaccount:b:puller", Repositories: []string{"team-b"}})
	setAzureEnv(t, a.AD.URL, env.Proxy.URL)
	accounts := &fakeAccounts{}
	for ns, client := range map[string]string{"a": clientA, "b": clientB} {
		accounts.add(ns, "puller", map[string]string{"azure.workload.identity/client-id": client, "azure.workload.identity/tenant-id": azureTenant})
	}
	// Proxy from the environment is read when the Exchanger is made.
	ex, err := New(Options{ServiceAccounts: accounts, CABundle: env.CA.PEM})
	require.NoError(t, err)
	return &azureEnv{azure: a, accounts: accounts, ex: ex}
}

func setAzureEnv(t *testing.T, authority, proxy string) {
	t.Setenv("AZURE_AUTHORITY_HOST", authority)
	t.Setenv("HTTPS_PROXY", proxy)
	t.Setenv("NO_PROXY", "")
	for _, k := range []string{"AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_FEDERATED_TOKEN_FILE", "AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PATH", "AZURE_USERNAME", "IDENTITY_ENDPOINT", "MSI_ENDPOINT"} {
		t.Setenv(k, "")
	}
}

func (e *azureEnv) credential(t *testing.T, id Identity) (string, string, error) {
	creds, err := e.ex.Credentials(v1alpha1.RegistryProviderAzure, id)
	require.NoError(t, err)
	c, err := creds(t.Context(), e.azure.RegistryHost)
	return c.Username, c.Password, err
}

// A ServiceAccount's federated identity gets an ACR refresh token that reads its repositories
// only; another namespace's ServiceAccount naming the first identity is refused by Azure AD.
func TestAzureObjectLevelIdentity(t *testing.T) {
	e := newAzureEnv(t)
	user, pass, err := e.credential(t, Identity{Namespace: "a", ServiceAccount: "puller"})
	require.NoError(t, err)
	status, msg := e.azure.Authorize(user, pass, "team-a/addon")
	assert.Equal(t, 200, status, msg)
	status, _ = e.azure.Authorize(user, pass, "team-b/addon")
	assert.Equal(t, 403, status)
	assert.Equal(t, int64(1), e.azure.Exchanges.Load())

	_, pass2, err := e.credential(t, Identity{Namespace: "a", ServiceAccount: "puller"})
	require.NoError(t, err)
	assert.Equal(t, pass, pass2, "cached")

	e.accounts.add("b", "thief", map[string]string{"azure.workload.identity/client-id": clientA, "azure.workload.identity/tenant-id": azureTenant})
	_, _, err = e.credential(t, Identity{Namespace: "b", ServiceAccount: "thief"})
	var xerr *Error
	require.ErrorAs(t, err, &xerr)
	assert.Equal(t, StepRoleAssumption, xerr.Step)
	assert.Contains(t, err.Error(), "AADSTS70021")
	assert.Contains(t, err.Error(), "federated identity credential")
	for _, s := range e.azure.Issued() {
		assert.NotContains(t, err.Error(), s)
	}

	e.accounts.add("c", "bare", nil)
	_, _, err = e.credential(t, Identity{Namespace: "c", ServiceAccount: "bare"})
	require.ErrorAs(t, err, &xerr)
	assert.Equal(t, StepServiceAccount, xerr.Step)
	assert.Contains(t, err.Error(), "azure.workload.identity/client-id")
}

// The controller's own identity: Azure Workload Identity's environment (AZURE_CLIENT_ID,
// AZURE_TENANT_ID, AZURE_FEDERATED_TOKEN_FILE).
func TestAzureControllerIdentity(t *testing.T) {
	e := newAzureEnv(t)
	e.azure.AddIdentity(cloudstandin.Identity{TenantID: azureTenant, ClientID: "cccccccc-0000-0000-0000-000000000003", Subject: "system:serviceaccount:platform:pkgsync", Repositories: []string{"platform"}})
	file := t.TempDir() + "/token"
	require.NoError(t, writeFile(file, "token-of-platform/pkgsync-1-api://AzureADTokenExchange"))
	t.Setenv("AZURE_CLIENT_ID", "cccccccc-0000-0000-0000-000000000003")
	t.Setenv("AZURE_TENANT_ID", azureTenant)
	t.Setenv("AZURE_FEDERATED_TOKEN_FILE", file)
	user, pass, err := e.credential(t, Identity{})
	require.NoError(t, err)
	status, msg := e.azure.Authorize(user, pass, "platform/addon")
	assert.Equal(t, 200, status, msg)
}
