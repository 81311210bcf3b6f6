package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/test/cloudstandin"
	"pkgsync.dev/pkgsync/test/testenv"
)

// awsMachine is a machine with AWS credentials (an access key in its environment) and a
// stand-in ECR: ECR's API at AWS_ENDPOINT_URL_ECR, the registry
// 123456789012.dkr.ecr.us-east-1.amazonaws.com through HTTPS_PROXY, in front of a real
// registry, accepting only the tokens the stand-in issued for the key's role.
type awsMachine struct {
	*cloudstandin.AWS
	caFile string
}

func newAWSMachine(t *testing.T) *awsMachine {
	t.Helper()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{Own: true})
	env := cloudstandin.NewEnv(t)
	a := env.AWS(t, reg.Host, nil)
	a.AddRole(cloudstandin.Role{ARN: a.RoleARN("ci"), Repositories: []string{"team"}})
	a.AddUser(cloudstandin.User{AccessKeyID: "AKIASTANDIN000000001", SecretAccessKey: "stand-in-secret-key-of-ci", RoleARN: a.RoleARN("ci")})
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "AKIASTANDIN000000001", "AWS_SECRET_ACCESS_KEY": "stand-in-secret-key-of-ci",
		"AWS_ENDPOINT_URL_ECR": a.ECR.URL, "AWS_ENDPOINT_URL_STS": a.STS.URL,
		"HTTPS_PROXY": env.Proxy.URL, "NO_PROXY": "",
		"AWS_CONFIG_FILE": "/nonexistent", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent", "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_CA_BUNDLE": "", "AWS_SESSION_TOKEN": "", "AWS_PROFILE": "", "AWS_ROLE_ARN": "", "AWS_WEB_IDENTITY_TOKEN_FILE": "",
	} {
		t.Setenv(k, v)
	}
	return &awsMachine{AWS: a, caFile: env.CAFile}
}

// build --push, pull, render REF, sign and verify reach ECR with --provider aws and the
// machine's AWS credentials; without it the registry refuses them; with a key ECR does not
// know, the error names the failed exchange.
func TestProviderAWS(t *testing.T) {
	m := newAWSMachine(t)
	key, pub := writeKeyPair(t, t.TempDir(), "s3cret")
	t.Setenv("COSIGN_PASSWORD", "s3cret")
	ref := m.RegistryHost + "/team/addon:v1"
	cloud := []string{"--provider", "aws", "--ca-file", m.caFile, "--registry-config", emptyDockerConfig(t)}
	tmp := t.TempDir()

	out, err := runPkgsync(t, append([]string{"build", writePackage(t), "--tag", ref, "--push"}, cloud...)...)
	require.NoError(t, err)
	assert.Contains(t, out, "Pushed "+ref)
	_, err = runPkgsync(t, append([]string{"pull", ref, "--into", filepath.Join(tmp, "pulled")}, cloud...)...)
	require.NoError(t, err)
	assert.FileExists(t, filepath.Join(tmp, "pulled", "manifest.yaml"))
	out, err = runPkgsync(t, append([]string{"render", ref}, cloud...)...)
	require.NoError(t, err)
	assert.Contains(t, out, "kind: ConfigMap")
	_, err = runPkgsync(t, append([]string{"sign", ref, "--key", key}, cloud...)...)
	require.NoError(t, err)
	_, err = runPkgsync(t, append([]string{"verify", ref, "--key", pub}, cloud...)...)
	require.NoError(t, err)
	assert.Positive(t, m.RegistryTokens.Load())
	assert.Zero(t, m.RegistryRefused.Load())

	// Without --provider the registry asks for credentials the Docker config does not have.
	_, err = runPkgsync(t, "pull", ref, "--into", filepath.Join(tmp, "anonymous"), "--ca-file", m.caFile, "--registry-config", emptyDockerConfig(t))
	require.ErrorContains(t, err, "authentication required")

	// Another repository: the role may not read it.
	_, err = runPkgsync(t, append([]string{"pull", m.RegistryHost + "/other/addon:v1", "--into", filepath.Join(tmp, "other")}, cloud...)...)
	require.ErrorContains(t, err, "403")

	// A key ECR does not know: the registry token exchange fails, and says so.
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIASTANDIN999999999")
	_, err = runPkgsync(t, append([]string{"pull", ref, "--into", filepath.Join(tmp, "unknown")}, cloud...)...)
	require.ErrorContains(t, err, "registry token failed")
	assert.ErrorContains(t, err, "this machine's credentials")
	assert.ErrorContains(t, err, "ecr:GetAuthorizationToken")
	for _, s := range m.Issued() {
		assert.False(t, strings.Contains(err.Error(), s), "no credential in the error")
	}
}

// --provider names a cloud whose registries the command does not name, or no cloud: a usage
// error.
func TestProviderUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ provider, ref, want string }{
		{"aws", "ghcr.io/team/addon:v1", "is not an Amazon ECR registry"},
		{"azure", "123456789012.dkr.ecr.us-east-1.amazonaws.com/team/addon:v1", "is not an Azure Container Registry"},
		{"gcp", "myacr.azurecr.io/team/addon:v1", "is not a Google Artifact Registry"},
		{"oracle", "ghcr.io/team/addon:v1", "--provider must be generic, aws, azure or gcp"},
	} {
		_, _, err := runCLI(t, "pull", tt.ref, "--into", t.TempDir(), "--provider", tt.provider, "--registry-config", emptyDockerConfig(t))
		require.ErrorContains(t, err, tt.want, tt.provider)
		var code exitCodeError
		require.ErrorAs(t, err, &code)
		assert.Equal(t, 2, code.code)
	}
}

// pull and render REF reach ACR with --provider azure and the machine's Azure credentials (a
// workload identity's environment: AZURE_CLIENT_ID, AZURE_TENANT_ID, AZURE_FEDERATED_TOKEN_FILE,
// AZURE_AUTHORITY_HOST).
func TestProviderAzure(t *testing.T) {
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{Own: true})
	env := cloudstandin.NewEnv(t)
	const assertion = "federated-token-of-ci"
	az := env.Azure(t, reg.Host, func(_ context.Context, token, audience string) (string, error) {
		if token != assertion || audience != "api://AzureADTokenExchange" {
			return "", errors.New("unknown token")
		}
		return "ci", nil
	})
	const tenant, client = "11111111-1111-1111-1111-111111111111", "cccccccc-0000-0000-0000-00000000000c"
	az.AddIdentity(cloudstandin.Identity{TenantID: tenant, ClientID: client, Subject: "ci", Repositories: []string{"team"}})
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(assertion), 0o600))
	for k, v := range map[string]string{
		"AZURE_AUTHORITY_HOST": az.AD.URL, "AZURE_CLIENT_ID": client, "AZURE_TENANT_ID": tenant, "AZURE_FEDERATED_TOKEN_FILE": tokenFile,
		"AZURE_CLIENT_SECRET": "", "AZURE_CLIENT_CERTIFICATE_PATH": "", "AZURE_USERNAME": "", "HTTPS_PROXY": env.Proxy.URL, "NO_PROXY": "",
	} {
		t.Setenv(k, v)
	}
	pushRenderPull(t, az.RegistryHost+"/team/addon:v1", "--provider", "azure", "--ca-file", env.CAFile, "--registry-config", emptyDockerConfig(t))
	assert.Positive(t, az.Exchanges.Load())
	assert.Zero(t, az.RegistryRefused.Load())
}

// pull and render REF reach Artifact Registry with --provider gcp and the machine's Google
// credentials (here a metadata server's, at GCE_METADATA_HOST).
func TestProviderGCP(t *testing.T) {
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{Own: true})
	env := cloudstandin.NewEnv(t)
	const ci = "ci@platform-prod.iam.gserviceaccount.com"
	g := env.GCP(t, reg.Host, nil, ci)
	g.AddServiceAccount(cloudstandin.GoogleServiceAccount{Email: ci, Repositories: []string{"team"}})
	for k, v := range map[string]string{
		"GCE_METADATA_HOST": g.MetadataHost, "HTTPS_PROXY": env.Proxy.URL, "NO_PROXY": "",
		"GOOGLE_APPLICATION_CREDENTIALS": "", "CLOUDSDK_CONFIG": t.TempDir(),
	} {
		t.Setenv(k, v)
	}
	pushRenderPull(t, g.RegistryHost+"/"+g.Project+"/team/addon:v1", "--provider", "gcp", "--ca-file", env.CAFile, "--registry-config", emptyDockerConfig(t))
	assert.Zero(t, g.RegistryRefused.Load())
	assert.Positive(t, g.RegistryServed.Load())
}

// pushRenderPull builds and pushes a package to ref, renders it from there and pulls it, each
// with the flags cloud.
func pushRenderPull(t *testing.T, ref string, cloud ...string) {
	t.Helper()
	out, err := runPkgsync(t, append([]string{"build", writePackage(t), "--tag", ref, "--push"}, cloud...)...)
	require.NoError(t, err)
	assert.Contains(t, out, "Pushed "+ref)
	out, err = runPkgsync(t, append([]string{"render", ref}, cloud...)...)
	require.NoError(t, err)
	assert.Contains(t, out, "kind: ConfigMap")
	_, err = runPkgsync(t, append([]string{"pull", ref, "--into", filepath.Join(t.TempDir(), "pulled")}, cloud...)...)
	require.NoError(t, err)
}
