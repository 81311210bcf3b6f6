package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/test/cloudstandin"
)

const e2eAzureTenant = "11111111-1111-1111-1111-111111111111"

// A Package pulls from a stand-in Azure Container Registry with its ServiceAccount's federated
// identity (a TokenRequest, exchanged at the Azure AD stand-in named by AZURE_AUTHORITY_HOST,
// then at the registry's /oauth2/exchange). Another namespace's ServiceAccount naming the same
// identity is refused by Azure AD (no federated credential for its subject); another identity
// is refused the repository by the registry. No credential appears in status, events or the log.
func TestCloudAzureObjectLevelIdentity(t *testing.T) {
	t.Parallel()
	const shard = "cloud-azure"
	env := cloudstandin.NewEnv(t)
	az := env.Azure(t, suite.registry.Host, cloudstandin.TokenReviewer(suite.mgmtClient))
	proc := runControllerWithEnv(t, shard, []string{
		"AZURE_AUTHORITY_HOST=" + az.AD.URL, "HTTPS_PROXY=" + env.Proxy.URL, "NO_PROXY=",
		"AZURE_CLIENT_ID=", "AZURE_TENANT_ID=", "AZURE_FEDERATED_TOKEN_FILE=", "AZURE_CLIENT_SECRET=",
	}, "--plain-http-registry", suite.registry.Host, "--ca-file", env.CAFile)

	nsA, nsB := newNamespace(t), newNamespace(t)
	for ns, client := range map[string]string{nsA: "aaaaaaaa-0000-0000-0000-00000000000a", nsB: "bbbbbbbb-0000-0000-0000-00000000000b"} {
		az.AddIdentity(cloudstandin.Identity{TenantID: e2eAzureTenant, ClientID: client, Subject: "system:serviceaccount:" + ns + ":puller", Repositories: []string{"e2e/cloud/" + ns}})
		serviceAccount(t, ns, "puller", map[string]string{"azure.workload.identity/client-id": client, "azure.workload.identity/tenant-id": e2eAzureTenant})
	}
	pushPackage(t, writePackage(t, configMapsPackage(nsA, nil, "from-acr")), "e2e/cloud/"+nsA+"/addon:v1")
	acrPackage := func(ns, name, repo, sa string) *v1alpha1.Package {
		return &v1alpha1.Package{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{shardLabel: shard}},
			Spec: v1alpha1.PackageSpec{Image: az.RegistryHost + "/" + repo, Provider: v1alpha1.RegistryProviderAzure,
				ServiceAccountName: sa, Interval: &metav1.Duration{Duration: time.Hour}},
		}
	}

	a := acrPackage(nsA, "addon", "e2e/cloud/"+nsA+"/addon:v1", "puller")
	createPackage(t, a)
	waitForReady(t, a, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	assert.True(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", nsA, "from-acr"))

	other := acrPackage(nsB, "other", "e2e/cloud/"+nsA+"/addon:v1", "puller")
	createPackage(t, other)
	cond := waitForReady(t, other, metav1.ConditionFalse, v1alpha1.AuthenticationFailedReason)
	assert.Contains(t, cond.Message, "403")

	serviceAccount(t, nsB, "thief", map[string]string{"azure.workload.identity/client-id": "aaaaaaaa-0000-0000-0000-00000000000a", "azure.workload.identity/tenant-id": e2eAzureTenant})
	thief := acrPackage(nsB, "thief", "e2e/cloud/"+nsA+"/addon:v1", "thief")
	createPackage(t, thief)
	cond = waitForReady(t, thief, metav1.ConditionFalse, v1alpha1.AuthenticationFailedReason)
	assert.Contains(t, cond.Message, "role assumption failed")
	assert.Contains(t, cond.Message, "AADSTS70021")
	assert.Positive(t, az.ADRefused.Load())

	assertNoCredentials(t, az.Issued(), proc, a, other, thief)
}
