package cloudstandin

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Identity is an Azure managed identity (or app registration): the one ServiceAccount its
// federated credential trusts, and the registry repositories (path prefixes, "" for all) its
// role assignment lets it read and write.
type Identity struct {
	TenantID, ClientID string
	// Subject is the federated credential's subject, system:serviceaccount:NS:NAME.
	Subject      string
	Repositories []string
}

// Azure stands in for Azure AD (the authority host: tenant discovery and the token endpoint of
// client assertions) and one Azure Container Registry with its /oauth2/exchange.
type Azure struct {
	// AD is the authority host (https://127.0.0.1:PORT), for AZURE_AUTHORITY_HOST.
	AD *httptest.Server
	// RegistryHost is the registry's name, pkgsync.azurecr.io; Front serves it (through Proxy).
	RegistryHost string
	Front        *httptest.Server

	verify VerifyToken

	mu         sync.Mutex
	identities map[string]Identity // by client ID
	access     map[string]*grant   // AAD access tokens, grant.role the client ID
	refresh    map[string]*grant   // ACR refresh tokens
	issued     []string

	// RefreshTokenLifetime is how long the ACR refresh tokens issued next are valid (3 hours,
	// as ACR's, by default).
	RefreshTokenLifetime atomic.Int64
	// Counters.
	ADTokens, ADRefused, Exchanges, ExchangesRefused atomic.Int64
	registryCounters
}

// AzureScope is the scope ACR's AAD tokens are asked for, in the public cloud.
const AzureScope = "https://containerregistry.azure.net/.default"

// NewAzure starts the stand-ins, certificates signed by ca, the registry front forwarding to
// upstream (host:port of a plain-HTTP registry), its name routed by proxy.
func NewAzure(ca *CA, proxy *Proxy, upstream string, verify VerifyToken) (*Azure, error) {
	a := &Azure{RegistryHost: "pkgsync.azurecr.io", verify: verify,
		identities: map[string]Identity{}, access: map[string]*grant{}, refresh: map[string]*grant{}}
	a.RefreshTokenLifetime.Store(int64(3 * time.Hour))
	var err error
	if a.AD, err = serveTLS(ca, http.HandlerFunc(a.serveAD)); err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/oauth2/exchange", a.serveExchange)
	mux.Handle("/", frontHandler(a.Authorize, upstream))
	if a.Front, err = serveTLS(ca, mux, a.RegistryHost); err != nil {
		return nil, err
	}
	proxy.Route(a.RegistryHost+":443", a.Front.Listener.Addr().String())
	return a, nil
}

// Close stops the servers.
func (a *Azure) Close() {
	a.AD.Close()
	a.Front.Close()
}

// AddIdentity adds a managed identity.
func (a *Azure) AddIdentity(id Identity) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.identities[id.ClientID] = id
}

// Issued returns every secret the stand-ins issued or were sent.
func (a *Azure) Issued() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.issued...)
}

func (a *Azure) record(s ...string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.issued = append(a.issued, s...)
}

func (a *Azure) serveAD(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	base := "https://" + r.Host
	switch {
	case len(parts) == 4 && parts[1] == "v2.0" && parts[2] == ".well-known" && parts[3] == "openid-configuration":
		tenant := parts[0]
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"token_endpoint":         base + "/" + tenant + "/oauth2/v2.0/token",
			"authorization_endpoint": base + "/" + tenant + "/oauth2/v2.0/authorize",
			"issuer":                 base + "/" + tenant + "/v2.0",
		})
	case len(parts) == 4 && parts[1] == "oauth2" && parts[3] == "token" && r.Method == http.MethodPost:
		a.serveToken(w, r, parts[0])
	default:
		adError(w, http.StatusNotFound, "invalid_request", "no such endpoint: "+r.URL.Path)
	}
}

func adError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": code, "error_description": msg, "error_codes": []int{70021}})
}

// serveToken answers a client assertion (the ServiceAccount's token) for an identity whose
// federated credential trusts its subject.
func (a *Azure) serveToken(w http.ResponseWriter, r *http.Request, tenant string) {
	if err := r.ParseForm(); err != nil {
		adError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	assertion := r.Form.Get("client_assertion")
	a.record(assertion)
	a.mu.Lock()
	id, ok := a.identities[r.Form.Get("client_id")]
	a.mu.Unlock()
	if r.Form.Get("grant_type") != "client_credentials" || r.Form.Get("client_assertion_type") != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer" {
		a.ADRefused.Add(1)
		adError(w, http.StatusBadRequest, "unsupported_grant_type", "only client assertions are served")
		return
	}
	if !ok || id.TenantID != tenant {
		a.ADRefused.Add(1)
		adError(w, http.StatusBadRequest, "unauthorized_client", "AADSTS700016: Application with identifier '"+r.Form.Get("client_id")+"' was not found in the directory")
		return
	}
	subject := ""
	var err error
	if a.verify != nil {
		subject, err = a.verify(r.Context(), assertion, "api://AzureADTokenExchange")
	}
	if a.verify == nil || err != nil || subject != id.Subject {
		a.ADRefused.Add(1)
		adError(w, http.StatusBadRequest, "invalid_client", fmt.Sprintf("AADSTS70021: No matching federated identity record found for presented assertion subject '%s'", subject))
		return
	}
	a.ADTokens.Add(1)
	token := newSecret("aad-")
	a.mu.Lock()
	a.access[token] = &grant{role: id.ClientID, expires: time.Now().Add(time.Hour)}
	a.issued = append(a.issued, token)
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"token_type": "Bearer", "expires_in": 3599, "ext_expires_in": 3599, "access_token": token})
}

// serveExchange swaps an AAD access token for an ACR refresh token (a JWT, whose exp the client
// reads).
func (a *Azure) serveExchange(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.Form.Get("grant_type") != "access_token" || r.Form.Get("service") != a.RegistryHost {
		a.ExchangesRefused.Add(1)
		http.Error(w, `{"errors":[{"code":"UNSUPPORTED","message":"grant_type access_token for this registry only"}]}`, http.StatusBadRequest)
		return
	}
	a.mu.Lock()
	g, ok := a.access[r.Form.Get("access_token")]
	a.mu.Unlock()
	if !ok || time.Now().After(g.expires) {
		a.ExchangesRefused.Add(1)
		http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"the access token is invalid"}]}`, http.StatusUnauthorized)
		return
	}
	a.Exchanges.Add(1)
	expires := time.Now().Add(time.Duration(a.RefreshTokenLifetime.Load()))
	claims, _ := json.Marshal(map[string]any{"exp": expires.Unix(), "aud": a.RegistryHost, "sub": g.role, "jti": newSecret("")})
	enc := base64.RawURLEncoding
	token := enc.EncodeToString([]byte(`{"alg":"RS256","typ":"JWT"}`)) + "." + enc.EncodeToString(claims) + "." + enc.EncodeToString([]byte(newSecret("sig-")))
	a.mu.Lock()
	a.refresh[token] = &grant{role: g.role, expires: expires}
	a.issued = append(a.issued, token)
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"refresh_token": token})
}

// Authorize decides a registry request: basic auth with the null user and a refresh token the
// exchange issued, not expired, whose identity may read repository ("" for the /v2/ ping).
func (a *Azure) Authorize(username, password, repository string) (int, string) {
	a.mu.Lock()
	g, ok := a.refresh[password]
	var repos []string
	if ok {
		repos = a.identities[g.role].Repositories
	}
	a.mu.Unlock()
	return a.decide("00000000-0000-0000-0000-000000000000", username, password, repository, g, ok, repos,
		"client with object id %s does not have authorization to perform action Microsoft.ContainerRegistry/registries/pull/read over repository %s")
}
