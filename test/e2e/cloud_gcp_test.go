package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/test/cloudstandin"
)

// A Package pulls from a stand-in Artifact Registry with its ServiceAccount's GKE Workload
// Identity (a TokenRequest for the pool named by the metadata server at GCE_METADATA_HOST,
// exchanged at the STS stand-in, then for the Google service account's access token at IAM
// credentials). Another namespace's ServiceAccount naming the first tenant's Google service
// account is refused by IAM; no credential appears in status, events or the log.
func TestCloudGCPObjectLevelIdentity(t *testing.T) {
	t.Parallel()
	const shard = "cloud-gcp"
	env := cloudstandin.NewEnv(t)
	g := env.GCP(t, suite.registry.Host, cloudstandin.TokenReviewer(suite.mgmtClient), "")
	proc := runControllerWithEnv(t, shard, []string{
		"GCE_METADATA_HOST=" + g.MetadataHost, "HTTPS_PROXY=" + env.Proxy.URL, "NO_PROXY=",
		"GOOGLE_APPLICATION_CREDENTIALS=", "CLOUDSDK_CONFIG=" + t.TempDir(),
	}, "--plain-http-registry", suite.registry.Host, "--ca-file", env.CAFile)

	nsA, nsB := newNamespace(t), newNamespace(t)
	g.AddServiceAccount(cloudstandin.GoogleServiceAccount{Email: g.Email("tenant-a"), Members: []string{nsA + "/puller"}, Repositories: []string{"e2e/cloud/" + nsA}})
	serviceAccount(t, nsA, "puller", map[string]string{"iam.gke.io/gcp-service-account": g.Email("tenant-a")})
	repo := g.Project + "/e2e/cloud/" + nsA + "/addon"
	pushPackage(t, writePackage(t, configMapsPackage(nsA, nil, "from-gar")), repo+":v1")
	garPackage := func(ns, name, sa string) *v1alpha1.Package {
		return &v1alpha1.Package{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{shardLabel: shard}},
			Spec: v1alpha1.PackageSpec{Image: g.RegistryHost + "/" + repo + ":v1", Provider: v1alpha1.RegistryProviderGCP,
				ServiceAccountName: sa, Interval: &metav1.Duration{Duration: time.Hour}},
		}
	}

	a := garPackage(nsA, "addon", "puller")
	createPackage(t, a)
	waitForReady(t, a, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	assert.True(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", nsA, "from-gar"))

	serviceAccount(t, nsB, "thief", map[string]string{"iam.gke.io/gcp-service-account": g.Email("tenant-a")})
	thief := garPackage(nsB, "thief", "thief")
	createPackage(t, thief)
	cond := waitForReady(t, thief, metav1.ConditionFalse, v1alpha1.AuthenticationFailedReason)
	assert.Contains(t, cond.Message, "role assumption failed")
	assert.Contains(t, cond.Message, "iam.serviceAccounts.getAccessToken")
	assert.Positive(t, g.AccessRefused.Load())

	assertNoCredentials(t, g.Issued(), proc, a, thief)
}
