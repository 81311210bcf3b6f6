package cloudauth

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/test/cloudstandin"
)

// fakeAccounts are ServiceAccounts whose tokens are "token-of-NS/NAME-N": the stand-in's
// verifier maps them back to their subject. The envtest API server issues real ones in the e2e
// suite (test/e2e/cloud_test.go).
type fakeAccounts struct {
	mu       sync.Mutex
	accounts map[string]*corev1.ServiceAccount
	issued   int
	fail     error
}

func (f *fakeAccounts) add(ns, name string, annotations map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.accounts == nil {
		f.accounts = map[string]*corev1.ServiceAccount{}
	}
	f.accounts[ns+"/"+name] = &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations}}
}

func (f *fakeAccounts) Get(_ context.Context, ns, name string) (*corev1.ServiceAccount, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sa, ok := f.accounts[ns+"/"+name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "serviceaccounts"}, name)
	}
	return sa.DeepCopy(), nil
}

func (f *fakeAccounts) Token(_ context.Context, sa *corev1.ServiceAccount, audiences []string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return "", f.fail
	}
	f.issued++
	return fmt.Sprintf("token-of-%s/%s-%d-%s", sa.Namespace, sa.Name, f.issued, strings.Join(audiences, ",")), nil
}

func fakeVerify(_ context.Context, token, audience string) (string, error) {
	rest, ok := strings.CutPrefix(token, "token-of-")
	if !ok || !strings.HasSuffix(rest, "-"+audience) {
		return "", errors.New("bad token")
	}
	nsName := rest[:strings.Index(rest, "-")]
	ns, name, _ := strings.Cut(nsName, "/")
	return "system:serviceaccount:" + ns + ":" + name, nil
}

type awsEnv struct {
	aws      *cloudstandin.AWS
	accounts *fakeAccounts
	ex       *Exchanger
	now      *clock
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// newAWSEnv starts the AWS stand-ins with two tenants' roles (tenant-a may read team-a/, tenant-b
// team-b/) and points the SDK at them by its own endpoint settings.
func newAWSEnv(t *testing.T) *awsEnv {
	env := cloudstandin.NewEnv(t)
	a := env.AWS(t, "127.0.0.1:1", fakeVerify)
	a.AddRole(cloudstandin.Role{ARN: a.RoleARN("tenant-a"), Subject: "system:serviceaccount:a:puller", Repositories: []string{"team-a"}})
	a.AddRole(cloudstandin.Role{ARN: a.RoleARN("tenant-b"), Subject: "system:serviceaccount:b:puller", Repositories: []string{"team-b"}})
	setAWSEnv(t, a)
	accounts := &fakeAccounts{}
	accounts.add("a", "puller", map[string]string{"eks.amazonaws.com/role-arn": a.RoleARN("tenant-a")})
	accounts.add("b", "puller", map[string]string{"eks.amazonaws.com/role-arn": a.RoleARN("tenant-b")})
	c := &clock{t: time.Now()}
	ex, err := New(Options{ServiceAccounts: accounts, CABundle: env.CA.PEM, Now: c.Now})
	require.NoError(t, err)
	return &awsEnv{aws: a, accounts: accounts, ex: ex, now: c}
}

// setAWSEnv points the AWS SDK at the stand-ins with its own settings, and away from this
// machine's configuration and metadata service.
func setAWSEnv(t *testing.T, a *cloudstandin.AWS) {
	t.Setenv("AWS_ENDPOINT_URL_STS", a.STS.URL)
	t.Setenv("AWS_ENDPOINT_URL_ECR", a.ECR.URL)
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_PROFILE", "AWS_REGION", "AWS_ENDPOINT_URL"} {
		t.Setenv(k, "")
	}
}

func (e *awsEnv) credential(t *testing.T, id Identity) (string, string, error) {
	creds, err := e.ex.Credentials(v1alpha1.RegistryProviderAWS, id)
	require.NoError(t, err)
	c, err := creds(t.Context(), e.aws.RegistryHost)
	return c.Username, c.Password, err
}

// A ServiceAccount's identity gets a registry credential that reads its role's repositories
// and no other tenant's; another namespace's ServiceAccount naming the same role is refused by
// the role's trust.
func TestAWSObjectLevelIdentity(t *testing.T) {
	e := newAWSEnv(t)
	user, pass, err := e.credential(t, Identity{Namespace: "a", ServiceAccount: "puller"})
	require.NoError(t, err)
	assert.Equal(t, "AWS", user)
	status, _ := e.aws.Authorize(user, pass, "team-a/addon")
	assert.Equal(t, 200, status)
	status, msg := e.aws.Authorize(user, pass, "team-b/addon")
	assert.Equal(t, 403, status, msg)

	// Tenant b annotates its own ServiceAccount with tenant a's role: STS refuses.
	e.accounts.add("b", "thief", map[string]string{"eks.amazonaws.com/role-arn": e.aws.RoleARN("tenant-a")})
	_, _, err = e.credential(t, Identity{Namespace: "b", ServiceAccount: "thief"})
	var xerr *Error
	require.ErrorAs(t, err, &xerr)
	assert.Equal(t, StepRoleAssumption, xerr.Step)
	assert.Contains(t, err.Error(), "AccessDenied")
	assert.Contains(t, err.Error(), "system:serviceaccount:b:thief")
	assert.Equal(t, int64(1), e.aws.AssumeRoleRefused.Load())
}

// The cache serves a credential only to the identity that obtained it, for the registry it was
// obtained for, until shortly before it expires; then it is renewed before it fails.
func TestAWSCacheKeyAndRenewal(t *testing.T) {
	e := newAWSEnv(t)
	e.aws.RegistryTokenLifetime.Store(int64(time.Hour))
	a := Identity{Namespace: "a", ServiceAccount: "puller"}
	_, p1, err := e.credential(t, a)
	require.NoError(t, err)
	_, p2, err := e.credential(t, a)
	require.NoError(t, err)
	assert.Equal(t, p1, p2, "served from the cache")
	assert.Equal(t, int64(1), e.aws.RegistryTokens.Load())

	_, pb, err := e.credential(t, Identity{Namespace: "b", ServiceAccount: "puller"})
	require.NoError(t, err)
	assert.NotEqual(t, p1, pb, "another identity never gets a's credential")
	assert.Equal(t, int64(2), e.aws.RegistryTokens.Load())

	// 50 minutes on: still served (renewed 5 minutes before expiry).
	e.now.add(50 * time.Minute)
	_, p3, err := e.credential(t, a)
	require.NoError(t, err)
	assert.Equal(t, p1, p3)
	// 56 minutes on: within 5 minutes of expiry, renewed.
	e.now.add(6 * time.Minute)
	_, p4, err := e.credential(t, a)
	require.NoError(t, err)
	assert.NotEqual(t, p1, p4)
	assert.Equal(t, int64(3), e.aws.RegistryTokens.Load())
}

// Only the provider's registries get its credentials: a mirror's or an override's host is read
// anonymously.
func TestAWSOtherHostsAnonymous(t *testing.T) {
	e := newAWSEnv(t)
	creds, err := e.ex.Credentials(v1alpha1.RegistryProviderAWS, Identity{Namespace: "a", ServiceAccount: "puller"})
	require.NoError(t, err)
	for _, host := range []string{"mirror.example.com", "127.0.0.1:5000", "123456789012.dkr.ecr.us-east-1.amazonaws.com.evil.example"} {
		c, err := creds(t.Context(), host)
		require.NoError(t, err)
		assert.Empty(t, c.Password, host)
	}
	assert.Zero(t, e.aws.AssumeRoleCalls.Load())
	require.Error(t, e.ex.CheckRegistry(v1alpha1.RegistryProviderAWS, "ghcr.io"))
	require.NoError(t, e.ex.CheckRegistry(v1alpha1.RegistryProviderAWS, e.aws.RegistryHost))
}

// Each failed exchange is named, with what to do, and never quotes a token.
func TestAWSErrorsNameTheStep(t *testing.T) {
	e := newAWSEnv(t)
	e.accounts.add("c", "bare", nil)
	for _, tt := range []struct {
		name string
		id   Identity
		step Step
		hint string
		prep func()
	}{
		{"missing ServiceAccount", Identity{Namespace: "c", ServiceAccount: "nobody"}, StepServiceAccount, "create it", nil},
		{"no role annotation", Identity{Namespace: "c", ServiceAccount: "bare"}, StepServiceAccount, "eks.amazonaws.com/role-arn", nil},
		{"token request refused", Identity{Namespace: "a", ServiceAccount: "puller"}, StepTokenRequest, "serviceaccounts/token", func() {
			e.accounts.mu.Lock()
			e.accounts.fail = errors.New("serviceaccounts \"puller\" is forbidden")
			e.accounts.mu.Unlock()
		}},
		{"controller without identity", Identity{}, StepControllerIdentity, "IRSA", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.prep != nil {
				tt.prep()
			}
			_, _, err := e.credential(t, tt.id)
			var xerr *Error
			require.ErrorAs(t, err, &xerr)
			assert.Equal(t, tt.step, xerr.Step, err.Error())
			assert.Contains(t, err.Error(), tt.hint)
			assert.Contains(t, err.Error(), string(tt.step)+" failed")
		})
	}
	for _, s := range e.aws.Issued() {
		assert.NotContains(t, fmt.Sprint(e.ex), s)
	}
}

// Without ServiceAccounts (--no-object-level-workload-identity) a ServiceAccount's identity is
// refused before anything is asked.
func TestObjectLevelForbidden(t *testing.T) {
	ex, err := New(Options{})
	require.NoError(t, err)
	_, err = ex.Credentials(v1alpha1.RegistryProviderAWS, Identity{Namespace: "a", ServiceAccount: "puller"})
	require.ErrorIs(t, err, ErrObjectLevelForbidden)
	_, err = ex.Credentials(v1alpha1.RegistryProviderAWS, Identity{})
	require.NoError(t, err)
}

// The controller's own identity (IRSA: a role and a web identity token file) is exchanged
// through the SDK's own chain.
func TestAWSControllerIdentity(t *testing.T) {
	e := newAWSEnv(t)
	e.aws.AddRole(cloudstandin.Role{ARN: e.aws.RoleARN("controller"), Subject: "system:serviceaccount:platform:pkgsync", Repositories: []string{"platform"}})
	file := t.TempDir() + "/token"
	require.NoError(t, writeFile(file, "token-of-platform/pkgsync-1-sts.amazonaws.com"))
	t.Setenv("AWS_ROLE_ARN", e.aws.RoleARN("controller"))
	t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", file)
	user, pass, err := e.credential(t, Identity{})
	require.NoError(t, err)
	status, _ := e.aws.Authorize(user, pass, "platform/addon")
	assert.Equal(t, 200, status)
	status, _ = e.aws.Authorize(user, pass, "team-a/addon")
	assert.Equal(t, 403, status)
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o600) }
