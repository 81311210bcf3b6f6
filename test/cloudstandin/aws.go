package cloudstandin

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	signerv4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// VerifyToken checks a web identity token for audience and returns its subject
// (system:serviceaccount:NS:NAME): the issuer's check, which a cloud does with the cluster's
// OIDC discovery and the stand-ins do by asking the API server (TokenReviewer).
type VerifyToken func(ctx context.Context, token, audience string) (subject string, err error)

// Role is an IAM role: who may assume it with a web identity, and which ECR repositories (path
// prefixes, "" for all) it may pull from and push to.
type Role struct {
	ARN string
	// Subject is the only web identity allowed to assume it (system:serviceaccount:NS:NAME), as
	// a role's trust policy conditions sub.
	Subject      string
	Repositories []string
}

// User is an IAM user's static access key, acting as a role's permissions (ambient
// credentials of a machine: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY).
type User struct {
	AccessKeyID, SecretAccessKey string
	RoleARN                      string
}

// AWS stands in for STS, ECR's API and one ECR registry.
type AWS struct {
	Account, Region string
	// STS and ECR are the API endpoints (https://127.0.0.1:PORT), for AWS_ENDPOINT_URL_STS and
	// AWS_ENDPOINT_URL_ECR.
	STS, ECR *httptest.Server
	// RegistryHost is the registry's name, ACCOUNT.dkr.ecr.REGION.amazonaws.com; Front serves it
	// (reach it through Proxy, which routes RegistryHost:443 there).
	RegistryHost string
	Front        *httptest.Server

	verify   VerifyToken
	upstream string

	mu        sync.Mutex
	roles     map[string]Role
	users     map[string]User
	sessions  map[string]*awsSession // by access key ID
	passwords map[string]*grant      // registry passwords
	issued    []string

	// RegistryTokenLifetime is how long the ECR authorization tokens issued next are valid
	// (12 hours, as ECR's, by default).
	RegistryTokenLifetime atomic.Int64
	// Counters.
	AssumeRoleCalls, AssumeRoleRefused, RegistryTokens, RegistryTokensRefused atomic.Int64
	registryCounters
}

type awsSession struct {
	secret, token string
	role          string
	expires       time.Time
}

// NewAWS starts the stand-ins, their certificates signed by ca, the registry front forwarding
// to upstream (host:port of a plain-HTTP registry), its name routed by proxy.
func NewAWS(ca *CA, proxy *Proxy, upstream string, verify VerifyToken) (*AWS, error) {
	a := &AWS{Account: "123456789012", Region: "us-east-1", verify: verify, upstream: upstream,
		roles: map[string]Role{}, users: map[string]User{}, sessions: map[string]*awsSession{}, passwords: map[string]*grant{}}
	a.RegistryTokenLifetime.Store(int64(12 * time.Hour))
	a.RegistryHost = a.Account + ".dkr.ecr." + a.Region + ".amazonaws.com"
	var err error
	if a.STS, err = serveTLS(ca, http.HandlerFunc(a.serveSTS)); err != nil {
		return nil, err
	}
	if a.ECR, err = serveTLS(ca, http.HandlerFunc(a.serveECR)); err != nil {
		return nil, err
	}
	if a.Front, err = serveTLS(ca, frontHandler(a.Authorize, upstream), a.RegistryHost); err != nil {
		return nil, err
	}
	proxy.Route(a.RegistryHost+":443", a.Front.Listener.Addr().String())
	return a, nil
}

func serveTLS(ca *CA, h http.Handler, names ...string) (*httptest.Server, error) {
	cfg, err := ca.ServerConfig(names...)
	if err != nil {
		return nil, err
	}
	s := httptest.NewUnstartedServer(h)
	s.TLS = cfg
	s.StartTLS()
	return s, nil
}

// Close stops the servers.
func (a *AWS) Close() {
	a.STS.Close()
	a.ECR.Close()
	a.Front.Close()
}

// AddRole adds a role.
func (a *AWS) AddRole(r Role) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.roles[r.ARN] = r
}

// AddUser adds a user's access key.
func (a *AWS) AddUser(u User) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.users[u.AccessKeyID] = u
}

// RoleARN is the ARN of role name in the stand-in's account.
func (a *AWS) RoleARN(name string) string { return "arn:aws:iam::" + a.Account + ":role/" + name }

// Issued returns every secret the stand-ins issued or were sent (secret keys, session tokens,
// registry passwords and the authorization tokens that carry them, the web identity tokens),
// to look for in what must hold none.
func (a *AWS) Issued() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.issued...)
}

func (a *AWS) secret(prefix string) string { return newSecret(prefix) }

// newSecret is prefix and 24 random bytes in hex.
func newSecret(prefix string) string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

func (a *AWS) serveSTS(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.Form.Get("Action") != "AssumeRoleWithWebIdentity" {
		stsError(w, http.StatusBadRequest, "InvalidAction", "only AssumeRoleWithWebIdentity is served")
		return
	}
	a.AssumeRoleCalls.Add(1)
	a.mu.Lock()
	a.issued = append(a.issued, r.Form.Get("WebIdentityToken"))
	a.mu.Unlock()
	if a.verify == nil {
		a.AssumeRoleRefused.Add(1)
		stsError(w, http.StatusBadRequest, "InvalidIdentityToken", "no issuer is trusted")
		return
	}
	subject, err := a.verify(r.Context(), r.Form.Get("WebIdentityToken"), "sts.amazonaws.com")
	if err != nil {
		a.AssumeRoleRefused.Add(1)
		stsError(w, http.StatusBadRequest, "InvalidIdentityToken", "the web identity token does not verify: "+err.Error())
		return
	}
	a.mu.Lock()
	role, ok := a.roles[r.Form.Get("RoleArn")]
	a.mu.Unlock()
	if !ok || role.Subject != subject {
		a.AssumeRoleRefused.Add(1)
		stsError(w, http.StatusForbidden, "AccessDenied", "Not authorized to perform sts:AssumeRoleWithWebIdentity")
		return
	}
	s := &awsSession{secret: a.secret("secret-"), token: a.secret("session-"), role: role.ARN, expires: time.Now().Add(time.Hour)}
	akid := strings.ToUpper(a.secret("ASIA"))[:20]
	a.mu.Lock()
	a.sessions[akid] = s
	a.issued = append(a.issued, s.secret, s.token)
	a.mu.Unlock()
	w.Header().Set("Content-Type", "text/xml")
	fmt.Fprintf(w, `<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
<AssumeRoleWithWebIdentityResult><SubjectFromWebIdentityToken>%s</SubjectFromWebIdentityToken>
<AssumedRoleUser><Arn>%s/%s</Arn><AssumedRoleId>AROA:%s</AssumedRoleId></AssumedRoleUser>
<Credentials><AccessKeyId>%s</AccessKeyId><SecretAccessKey>%s</SecretAccessKey><SessionToken>%s</SessionToken><Expiration>%s</Expiration></Credentials>
<Audience>sts.amazonaws.com</Audience></AssumeRoleWithWebIdentityResult>
<ResponseMetadata><RequestId>stand-in</RequestId></ResponseMetadata></AssumeRoleWithWebIdentityResponse>`,
		xmlText(subject), xmlText(role.ARN), xmlText(r.Form.Get("RoleSessionName")), xmlText(r.Form.Get("RoleSessionName")),
		akid, s.secret, s.token, s.expires.UTC().Format(time.RFC3339))
}

func xmlText(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

func stsError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type><Code>%s</Code><Message>%s</Message></Error><RequestId>stand-in</RequestId></ErrorResponse>`, code, xmlText(msg))
}

func ecrError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": typ, "message": msg})
}

// serveECR answers GetAuthorizationToken to a request signed (SigV4, checked) with an access
// key the stand-in issued (with its session token) or a user's.
func (a *AWS) serveECR(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".GetAuthorizationToken") {
		ecrError(w, http.StatusBadRequest, "UnknownOperationException", "only GetAuthorizationToken is served")
		return
	}
	role, err := a.signer(r)
	if err != nil {
		a.RegistryTokensRefused.Add(1)
		ecrError(w, http.StatusBadRequest, "UnrecognizedClientException", err.Error())
		return
	}
	a.RegistryTokens.Add(1)
	password := a.secret("ecr-")
	expires := time.Now().Add(time.Duration(a.RegistryTokenLifetime.Load()))
	token := base64.StdEncoding.EncodeToString([]byte("AWS:" + password))
	a.mu.Lock()
	a.passwords[password] = &grant{role: role, expires: expires}
	a.issued = append(a.issued, password, token)
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_ = json.NewEncoder(w).Encode(map[string]any{"authorizationData": []map[string]any{{
		"authorizationToken": token, "expiresAt": float64(expires.UnixMilli()) / 1000, "proxyEndpoint": "https://" + a.RegistryHost,
	}}})
}

// signer checks the request's SigV4 signature and returns the role of its access key.
func (a *AWS) signer(r *http.Request) (string, error) {
	authz := r.Header.Get("Authorization")
	_, cred, ok := strings.Cut(authz, "Credential=")
	if !ok {
		return "", fmt.Errorf("the request is not signed")
	}
	akid, _, _ := strings.Cut(cred, "/")
	a.mu.Lock()
	s, isSession := a.sessions[akid]
	u, isUser := a.users[akid]
	a.mu.Unlock()
	var creds aws.Credentials
	var role string
	switch {
	case isSession:
		if r.Header.Get("X-Amz-Security-Token") != s.token || time.Now().After(s.expires) {
			return "", fmt.Errorf("the security token included in the request is invalid or expired")
		}
		creds, role = aws.Credentials{AccessKeyID: akid, SecretAccessKey: s.secret, SessionToken: s.token}, s.role
	case isUser:
		creds, role = aws.Credentials{AccessKeyID: akid, SecretAccessKey: u.SecretAccessKey}, u.RoleARN
	default:
		return "", fmt.Errorf("the security token included in the request is invalid")
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return "", err
	}
	if err := checkSignature(r, body, creds, a.Region); err != nil {
		return "", err
	}
	return role, nil
}

// checkSignature signs a copy of r with creds, as the SDK does, and compares the signatures.
func checkSignature(r *http.Request, body []byte, creds aws.Credentials, region string) error {
	when, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return fmt.Errorf("the request has no X-Amz-Date")
	}
	authz := r.Header.Get("Authorization")
	_, signed, _ := strings.Cut(authz, "SignedHeaders=")
	signed, _, _ = strings.Cut(signed, ",")
	cp, err := http.NewRequest(r.Method, "https://"+r.Host+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	for _, h := range strings.Split(signed, ";") {
		if h != "host" {
			cp.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
	}
	sum := sha256.Sum256(body)
	if err := signerv4.NewSigner().SignHTTP(context.Background(), creds, cp, hex.EncodeToString(sum[:]), "ecr", region, when); err != nil {
		return err
	}
	if sig(cp.Header.Get("Authorization")) != sig(authz) {
		return fmt.Errorf("the request signature we calculated does not match the signature you provided")
	}
	return nil
}

func sig(authz string) string {
	_, s, _ := strings.Cut(authz, "Signature=")
	return s
}

// Authorize decides a registry request: basic auth AWS:PASSWORD with a password ECR issued, not
// expired, whose role may read repository ("" for the /v2/ ping).
func (a *AWS) Authorize(username, password, repository string) (int, string) {
	a.mu.Lock()
	g, ok := a.passwords[password]
	var repos []string
	if ok {
		repos = a.roles[g.role].Repositories
	}
	a.mu.Unlock()
	return a.decide("AWS", username, password, repository, g, ok, repos, "User: %s is not authorized to perform: ecr:BatchGetImage on resource: repository/%s")
}

func allows(prefixes []string, repository string) bool {
	for _, p := range prefixes {
		if p == "" || repository == p || strings.HasPrefix(repository, strings.TrimSuffix(p, "/")+"/") {
			return true
		}
	}
	return false
}
