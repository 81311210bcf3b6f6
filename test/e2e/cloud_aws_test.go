package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/test/cloudstandin"
)

// awsCloud is the AWS stand-ins for one test: STS and ECR's API (reached by the SDK's
// AWS_ENDPOINT_URL_STS and AWS_ENDPOINT_URL_ECR), and an ECR registry named
// 123456789012.dkr.ecr.us-east-1.amazonaws.com (reached through HTTPS_PROXY) in front of the
// suite's registry, accepting only the authorization tokens ECR issued, for the repositories
// of the token's role. Web identity tokens are verified by the management API server that
// issued them (TokenReview).
type awsCloud struct {
	*cloudstandin.AWS
	proxy  *cloudstandin.Proxy
	caFile string
}

func newAWSCloud(t *testing.T) *awsCloud {
	t.Helper()
	env := cloudstandin.NewEnv(t)
	return &awsCloud{AWS: env.AWS(t, suite.registry.Host, cloudstandin.TokenReviewer(suite.mgmtClient)), proxy: env.Proxy, caFile: env.CAFile}
}

// env is the controller's environment for the stand-ins: the SDK's own endpoint settings, the
// proxy, and nothing of this machine's AWS configuration.
func (c *awsCloud) env() []string {
	return []string{
		"AWS_ENDPOINT_URL_STS=" + c.STS.URL, "AWS_ENDPOINT_URL_ECR=" + c.ECR.URL,
		"HTTPS_PROXY=" + c.proxy.URL, "NO_PROXY=",
		"AWS_CONFIG_FILE=/nonexistent", "AWS_SHARED_CREDENTIALS_FILE=/nonexistent", "AWS_EC2_METADATA_DISABLED=true",
		"AWS_CA_BUNDLE=", "AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=", "AWS_ROLE_ARN=", "AWS_WEB_IDENTITY_TOKEN_FILE=",
	}
}

// run starts a controller for shard with the stand-ins' environment and CA.
func (c *awsCloud) run(t *testing.T, shard string, args ...string) *controllerProc {
	t.Helper()
	return runControllerWithEnv(t, shard, c.env(), append([]string{"--plain-http-registry", suite.registry.Host, "--ca-file", c.caFile}, args...)...)
}

// tenant makes a ServiceAccount ns/puller that may write ConfigMaps in ns (the package's
// objects, applied as it) and whose cloud identity is role, which the role trusts and which may
// read the repositories under prefix.
func (c *awsCloud) tenant(t *testing.T, ns, role, prefix string) {
	t.Helper()
	c.AddRole(cloudstandin.Role{ARN: c.RoleARN(role), Subject: "system:serviceaccount:" + ns + ":puller", Repositories: []string{prefix}})
	serviceAccount(t, ns, "puller", map[string]string{"eks.amazonaws.com/role-arn": c.RoleARN(role)})
}

func serviceAccount(t *testing.T, ns, name string, annotations map[string]string) {
	t.Helper()
	require.NoError(t, suite.mgmtClient.Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations}}))
	require.NoError(t, suite.mgmtClient.Create(t.Context(), &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}}},
	}))
	require.NoError(t, suite.mgmtClient.Create(t.Context(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}},
	}))
}

func ecrPackage(c *awsCloud, ns, name, shard, repo, serviceAccount string, interval time.Duration) *v1alpha1.Package {
	return &v1alpha1.Package{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{shardLabel: shard}},
		Spec: v1alpha1.PackageSpec{Image: c.RegistryHost + "/" + repo, Provider: v1alpha1.RegistryProviderAWS,
			ServiceAccountName: serviceAccount, Interval: &metav1.Duration{Duration: interval}},
	}
}

// A Package pulls from ECR with its own ServiceAccount's cloud role (object-level workload
// identity: a TokenRequest for the ServiceAccount, exchanged at STS, then at ECR). Another
// namespace's Package, whose ServiceAccount has a role of its own, is refused that repository by
// the registry; one whose ServiceAccount names the first tenant's role is refused by STS (the
// role trusts the first tenant's ServiceAccount only). No credential appears in status, events
// or the controller's log.
func TestCloudAWSObjectLevelIdentity(t *testing.T) {
	t.Parallel()
	const shard = "cloud-aws"
	c := newAWSCloud(t)
	proc := c.run(t, shard)
	nsA, nsB := newNamespace(t), newNamespace(t)
	c.tenant(t, nsA, "tenant-a", "e2e/cloud/"+nsA)
	c.tenant(t, nsB, "tenant-b", "e2e/cloud/"+nsB)
	pushPackage(t, writePackage(t, configMapsPackage(nsA, nil, "from-ecr")), "e2e/cloud/"+nsA+"/addon:v1")
	pushPackage(t, writePackage(t, configMapsPackage(nsB, nil, "from-ecr")), "e2e/cloud/"+nsB+"/addon:v1")

	a := ecrPackage(c, nsA, "addon", shard, "e2e/cloud/"+nsA+"/addon:v1", "puller", time.Hour)
	createPackage(t, a)
	waitForReady(t, a, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	assert.True(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", nsA, "from-ecr"))

	// Tenant b's own package, with its own role: pulled.
	own := ecrPackage(c, nsB, "own", shard, "e2e/cloud/"+nsB+"/addon:v1", "puller", time.Hour)
	createPackage(t, own)
	waitForReady(t, own, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)

	// Tenant b names tenant a's image: its role may not read it.
	refused := c.RegistryRefused.Load()
	other := ecrPackage(c, nsB, "other", shard, "e2e/cloud/"+nsA+"/addon:v1", "puller", time.Hour)
	createPackage(t, other)
	cond := waitForReady(t, other, metav1.ConditionFalse, v1alpha1.AuthenticationFailedReason)
	assert.Contains(t, cond.Message, "403")
	assert.Greater(t, c.RegistryRefused.Load(), refused)

	// Tenant b's ServiceAccount names tenant a's role: STS refuses, the error says which
	// exchange failed and what to fix.
	serviceAccount(t, nsB, "thief", map[string]string{"eks.amazonaws.com/role-arn": c.RoleARN("tenant-a")})
	thief := ecrPackage(c, nsB, "thief", shard, "e2e/cloud/"+nsA+"/addon:v1", "thief", time.Hour)
	createPackage(t, thief)
	cond = waitForReady(t, thief, metav1.ConditionFalse, v1alpha1.AuthenticationFailedReason)
	assert.Contains(t, cond.Message, "role assumption failed")
	assert.Contains(t, cond.Message, "AccessDenied")
	assert.Contains(t, cond.Message, "system:serviceaccount:"+nsB+":thief")
	assert.Positive(t, c.AssumeRoleRefused.Load())

	assertNoCredentials(t, c.Issued(), proc, a, own, other, thief)
}

// A registry token near its expiry is renewed before it is refused: the Package, resolving its
// tag every second with tokens that live 6 seconds, goes through several tokens without one
// request refused and without leaving Ready.
func TestCloudAWSRenewal(t *testing.T) {
	t.Parallel()
	const shard = "cloud-aws-renew"
	c := newAWSCloud(t)
	c.RegistryTokenLifetime.Store(int64(6 * time.Second))
	proc := c.run(t, shard)
	ns := newNamespace(t)
	c.tenant(t, ns, "renew", "e2e/cloud/"+ns)
	pushPackage(t, writePackage(t, configMapsPackage(ns, nil, "renewed")), "e2e/cloud/"+ns+"/addon:v1")
	pkg := ecrPackage(c, ns, "addon", shard, "e2e/cloud/"+ns+"/addon:v1", "puller", time.Second)
	createPackage(t, pkg)
	ready := waitForReady(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	eventuallyFor(t, t.Context(), time.Minute, func(a *attempt) {
		assert.GreaterOrEqual(a, c.RegistryTokens.Load(), int64(4), "three renewals")
	})
	assert.Zero(t, c.RegistryRefused.Load(), "no request with an expired token")
	now := readyCondition(t, pkg)
	assert.Equal(t, metav1.ConditionTrue, now.Status)
	assert.Equal(t, ready.LastTransitionTime, now.LastTransitionTime, "Ready never left True")
	var events corev1.EventList
	require.NoError(t, suite.mgmtClient.List(t.Context(), &events, client.InNamespace(ns)))
	for _, e := range events.Items {
		assert.NotEqual(t, corev1.EventTypeWarning, e.Type, "%s: %s", e.Reason, e.Message)
	}
	assertNoCredentials(t, c.Issued(), proc, pkg)
}

// With --no-object-level-workload-identity the controller exchanges its own identity only
// (IRSA: AWS_ROLE_ARN and a web identity token file): a Package without a ServiceAccount pulls
// with the controller's role; one with a ServiceAccount is refused at once (InvalidSpec,
// stalled) and nothing is asked of STS for it.
func TestCloudAWSControllerIdentityOnly(t *testing.T) {
	t.Parallel()
	const shard = "cloud-aws-controller"
	c := newAWSCloud(t)
	controllerNS := newNamespace(t)
	require.NoError(t, suite.mgmtClient.Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: "pkgsync"}}))
	c.AddRole(cloudstandin.Role{ARN: c.RoleARN("controller"), Subject: "system:serviceaccount:" + controllerNS + ":pkgsync", Repositories: []string{"e2e/cloud/" + controllerNS}})
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(serviceAccountToken(t, controllerNS, "pkgsync", "sts.amazonaws.com")), 0o600))
	env := append(c.env(), "AWS_ROLE_ARN="+c.RoleARN("controller"), "AWS_WEB_IDENTITY_TOKEN_FILE="+tokenFile)
	proc := runControllerWithEnv(t, shard, env, "--plain-http-registry", suite.registry.Host, "--ca-file", c.caFile,
		"--namespace", controllerNS, "--no-object-level-workload-identity")

	pushPackage(t, writePackage(t, configMapsPackage(controllerNS, nil, "from-controller-role")), "e2e/cloud/"+controllerNS+"/addon:v1")
	cp := &v1alpha1.ClusterPackage{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + controllerNS, Labels: map[string]string{shardLabel: shard}},
		Spec: v1alpha1.PackageSpec{Image: c.RegistryHost + "/e2e/cloud/" + controllerNS + "/addon:v1", Provider: v1alpha1.RegistryProviderAWS,
			Interval: &metav1.Duration{Duration: time.Hour}},
	}
	createPackage(t, cp)
	waitForReady(t, cp, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)

	ns := newNamespace(t)
	c.tenant(t, ns, "tenant", "e2e/cloud/"+ns)
	calls := c.AssumeRoleCalls.Load()
	pkg := ecrPackage(c, ns, "addon", shard, "e2e/cloud/"+ns+"/addon:v1", "puller", time.Hour)
	createPackage(t, pkg)
	cond := waitForReady(t, pkg, metav1.ConditionFalse, v1alpha1.InvalidSpecReason)
	assert.Contains(t, cond.Message, "--no-object-level-workload-identity")
	assert.Equal(t, calls, c.AssumeRoleCalls.Load())
	assertNoCredentials(t, c.Issued(), proc, pkg)
}

// serviceAccountToken asks the management API server for a token of ns/name for audience.
func serviceAccountToken(t *testing.T, ns, name, audience string) string {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}}}
	require.NoError(t, suite.mgmtClient.SubResource("token").Create(t.Context(), sa, req))
	return req.Status.Token
}

// The schema refuses a provider it does not know, and a pull Secret with a cloud provider.
func TestCloudProviderSchema(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	for _, tt := range []struct {
		name    string
		edit    func(*v1alpha1.PackageSpec)
		refused string
	}{
		{"unknown", func(s *v1alpha1.PackageSpec) { s.Provider = "oracle" }, "spec.provider"},
		{"secret-and-cloud", func(s *v1alpha1.PackageSpec) {
			s.Provider = v1alpha1.RegistryProviderAWS
			s.PullSecretRef = &meta.LocalObjectReference{Name: "creds"}
		}, "spec.pullSecretRef is read with spec.provider generic only"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pkg := &v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tt.name}, Spec: v1alpha1.PackageSpec{Image: "registry.example.com/x:v1"}}
			tt.edit(&pkg.Spec)
			err := suite.mgmtClient.Create(t.Context(), pkg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.refused)
		})
	}
}

// assertNoCredentials checks that none of secrets is in the objects' status, the events of
// their namespaces or the controller's log.
func assertNoCredentials(t *testing.T, secrets []string, proc *controllerProc, objs ...client.Object) {
	t.Helper()
	require.NotEmpty(t, secrets)
	var texts []string
	namespaces := map[string]bool{}
	for _, obj := range objs {
		require.NoError(t, suite.mgmtClient.Get(t.Context(), clientKey(obj), obj))
		b, err := json.Marshal(obj)
		require.NoError(t, err)
		texts = append(texts, string(b))
		namespaces[obj.GetNamespace()] = true
	}
	for ns := range namespaces {
		var events corev1.EventList
		require.NoError(t, suite.mgmtClient.List(t.Context(), &events, client.InNamespace(ns)))
		b, err := json.Marshal(events.Items)
		require.NoError(t, err)
		texts = append(texts, string(b))
	}
	log, err := os.ReadFile(proc.logPath)
	require.NoError(t, err)
	texts = append(texts, string(log))
	for _, s := range secrets {
		if s == "" {
			continue
		}
		for _, text := range texts {
			assert.False(t, strings.Contains(text, s), "a credential (%d bytes) appears in status, an event or the log", len(s))
		}
	}
}
