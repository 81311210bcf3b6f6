package cloudstandin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// GoogleServiceAccount is a Google service account: the Kubernetes ServiceAccounts that may act
// as it (roles/iam.workloadIdentityUser for PROJECT.svc.id.goog[NS/NAME]), and the Artifact
// Registry repositories (path prefixes after the project, "" for all) it may read and write.
type GoogleServiceAccount struct {
	Email string
	// Members are the workload identities, NS/NAME, that may impersonate it.
	Members      []string
	Repositories []string
}

// GCP stands in for the GKE metadata server (GCE_METADATA_HOST, plain HTTP as the real one),
// Google's STS (sts.googleapis.com) and IAM credentials (iamcredentials.googleapis.com), both
// reached through Proxy, and one Artifact Registry host.
type GCP struct {
	Project, Location, Cluster string
	// Metadata is the metadata server; MetadataHost its host:port for GCE_METADATA_HOST.
	Metadata     *httptest.Server
	MetadataHost string
	// RegistryHost is LOCATION-docker.pkg.dev; Front serves it (through Proxy).
	RegistryHost    string
	STS, IAM, Front *httptest.Server

	verify VerifyToken
	// controller is the Google service account of the metadata server's default token.
	controller string

	mu        sync.Mutex
	accounts  map[string]GoogleServiceAccount
	federated map[string]*grant // STS tokens, grant.role the workload identity NS/NAME
	access    map[string]*grant // access tokens, grant.role the Google service account
	issued    []string

	// Counters.
	STSTokens, STSRefused, AccessTokens, AccessRefused atomic.Int64
	registryCounters
}

// NewGCP starts the stand-ins; controller is the Google service account the metadata server
// gives the controller's pod.
func NewGCP(ca *CA, proxy *Proxy, upstream string, verify VerifyToken, controller string) (*GCP, error) {
	g := &GCP{Project: "platform-prod", Location: "europe-west1", Cluster: "management", verify: verify, controller: controller,
		accounts: map[string]GoogleServiceAccount{}, federated: map[string]*grant{}, access: map[string]*grant{}}
	g.RegistryHost = g.Location + "-docker.pkg.dev"
	g.Metadata = httptest.NewServer(http.HandlerFunc(g.serveMetadata))
	g.MetadataHost = strings.TrimPrefix(g.Metadata.URL, "http://")
	var err error
	if g.STS, err = serveTLS(ca, http.HandlerFunc(g.serveSTS), "sts.googleapis.com"); err != nil {
		return nil, err
	}
	if g.IAM, err = serveTLS(ca, http.HandlerFunc(g.serveIAM), "iamcredentials.googleapis.com"); err != nil {
		return nil, err
	}
	if g.Front, err = serveTLS(ca, frontHandler(g.Authorize, upstream), g.RegistryHost); err != nil {
		return nil, err
	}
	proxy.Route("sts.googleapis.com:443", g.STS.Listener.Addr().String())
	proxy.Route("iamcredentials.googleapis.com:443", g.IAM.Listener.Addr().String())
	proxy.Route(g.RegistryHost+":443", g.Front.Listener.Addr().String())
	return g, nil
}

// Close stops the servers.
func (g *GCP) Close() {
	g.Metadata.Close()
	g.STS.Close()
	g.IAM.Close()
	g.Front.Close()
}

// AddServiceAccount adds a Google service account.
func (g *GCP) AddServiceAccount(sa GoogleServiceAccount) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.accounts[sa.Email] = sa
}

// Email is the email of Google service account name in the project.
func (g *GCP) Email(name string) string { return name + "@" + g.Project + ".iam.gserviceaccount.com" }

// Issued returns every secret the stand-ins issued or were sent.
func (g *GCP) Issued() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.issued...)
}

func (g *GCP) issue(to map[string]*grant, role string, life time.Duration) (string, time.Time) {
	token := newSecret("ya29.")
	expires := time.Now().Add(life)
	g.mu.Lock()
	to[token] = &grant{role: role, expires: expires}
	g.issued = append(g.issued, token)
	g.mu.Unlock()
	return token, expires
}

func (g *GCP) serveMetadata(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Metadata-Flavor") != "Google" {
		http.Error(w, "Missing Metadata-Flavor:Google header", http.StatusForbidden)
		return
	}
	w.Header().Set("Metadata-Flavor", "Google")
	switch strings.TrimPrefix(r.URL.Path, "/computeMetadata/v1/") {
	case "project/project-id":
		fmt.Fprint(w, g.Project)
	case "instance/attributes/cluster-location":
		fmt.Fprint(w, g.Location)
	case "instance/attributes/cluster-name":
		fmt.Fprint(w, g.Cluster)
	case "instance/service-accounts/default/token":
		if g.controller == "" {
			http.NotFound(w, r)
			return
		}
		token, _ := g.issue(g.access, g.controller, time.Hour)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": token, "expires_in": 3599, "token_type": "Bearer"})
	case "instance/service-accounts/default/email":
		fmt.Fprint(w, g.controller)
	default:
		http.NotFound(w, r)
	}
}

func googleError(w http.ResponseWriter, status int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": status, "message": msg, "status": reason},
		"error_description": msg})
}

// serveSTS exchanges a Kubernetes ServiceAccount token (audience the workload identity pool) for
// a federated token of its workload identity.
func (g *GCP) serveSTS(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.URL.Path != "/v1/token" || r.Form.Get("grant_type") != "urn:ietf:params:oauth:grant-type:token-exchange" {
		googleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "only token exchange is served")
		return
	}
	subjectToken := r.Form.Get("subject_token")
	g.mu.Lock()
	g.issued = append(g.issued, subjectToken)
	g.mu.Unlock()
	pool := g.Project + ".svc.id.goog"
	if !strings.HasPrefix(r.Form.Get("audience"), "identitynamespace:"+pool+":") || g.verify == nil {
		g.STSRefused.Add(1)
		googleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "invalid_target: the audience is not this project's workload identity pool")
		return
	}
	subject, err := g.verify(r.Context(), subjectToken, pool)
	if err != nil {
		g.STSRefused.Add(1)
		googleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "invalid_grant: the subject token does not verify")
		return
	}
	nsName := strings.Replace(strings.TrimPrefix(subject, "system:serviceaccount:"), ":", "/", 1)
	g.STSTokens.Add(1)
	token, _ := g.issue(g.federated, nsName, time.Hour)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": token, "issued_token_type": "urn:ietf:params:oauth:token-type:access_token", "token_type": "Bearer", "expires_in": 3600})
}

// serveIAM answers generateAccessToken for a Google service account the federated token's
// workload identity may impersonate.
func (g *GCP) serveIAM(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/projects/-/serviceAccounts/")
	email, ok2 := strings.CutSuffix(rest, ":generateAccessToken")
	if !ok || !ok2 || r.Method != http.MethodPost {
		googleError(w, http.StatusNotFound, "NOT_FOUND", "no such method")
		return
	}
	bearer := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	g.mu.Lock()
	fed, known := g.federated[bearer]
	sa, exists := g.accounts[email]
	g.mu.Unlock()
	if !known || time.Now().After(fed.expires) {
		g.AccessRefused.Add(1)
		googleError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "Request had invalid authentication credentials.")
		return
	}
	if !exists || !contains(sa.Members, fed.role) {
		g.AccessRefused.Add(1)
		googleError(w, http.StatusForbidden, "PERMISSION_DENIED", fmt.Sprintf("Permission 'iam.serviceAccounts.getAccessToken' denied on resource (or it may not exist). (workload identity %s)", fed.role))
		return
	}
	g.AccessTokens.Add(1)
	token, expires := g.issue(g.access, email, time.Hour)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"accessToken": token, "expireTime": expires.UTC().Format(time.RFC3339)})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Authorize decides a registry request: basic auth oauth2accesstoken with an access token of a
// Google service account that may read repository (PROJECT/REPO/..., "" for the /v2/ ping).
func (g *GCP) Authorize(username, password, repository string) (int, string) {
	g.mu.Lock()
	a, ok := g.access[password]
	var repos []string
	if ok {
		for _, r := range g.accounts[a.role].Repositories {
			repos = append(repos, g.Project+"/"+r)
		}
	}
	g.mu.Unlock()
	return g.decide("oauth2accesstoken", username, password, repository, a, ok, repos,
		"Permission \"artifactregistry.repositories.downloadArtifacts\" denied for %s on resource %q (or it may not exist)")
}
