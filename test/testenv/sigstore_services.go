package testenv

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-openapi/runtime"
	"github.com/sigstore/rekor/pkg/generated/models"
	"github.com/sigstore/rekor/pkg/types"

	// Registers the dsse v0.0.1 entry type cosign 3 logs its bundles' envelopes as.
	_ "github.com/sigstore/rekor/pkg/types/dsse/v0.0.1"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	"github.com/sigstore/sigstore-go/pkg/tlog"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

// SigstoreServices are a Fulcio and a Rekor of the test's own, served over real HTTP: what
// keyless signing talks to. They are third-party services, so httptest servers stand in for
// them (the registry and the API servers the tests use are the real processes). Fulcio issues
// certificates from a CA of its own for the key a request proves it holds, to the identity
// the token names; Rekor checks and canonicalizes the entry as Rekor does and answers with the
// virtual Sigstore's signed entry timestamp and inclusion proof.
type SigstoreServices struct {
	FulcioURL, RekorURL string

	sigstore        *Sigstore
	caRoot          *x509.Certificate
	caIntermediate  *x509.Certificate
	intermediateKey *ecdsa.PrivateKey
	caValidFrom     time.Time
	anotherKey      atomic.Bool
	certificates    atomic.Int64
	entries         atomic.Int64
}

// NewSigstoreServices starts a Fulcio and a Rekor, stopped when the test ends.
func NewSigstoreServices(t testing.TB) *SigstoreServices {
	t.Helper()
	sigstore, err := NewSigstore()
	if err != nil {
		t.Fatal(err)
	}
	rootCert, rootKey, err := ca.GenerateRootCa()
	if err != nil {
		t.Fatal(err)
	}
	intermediate, intermediateKey, err := ca.GenerateFulcioIntermediate(rootCert, rootKey)
	if err != nil {
		t.Fatal(err)
	}
	s := &SigstoreServices{sigstore: sigstore, caRoot: rootCert, caIntermediate: intermediate, intermediateKey: intermediateKey, caValidFrom: time.Now().Add(-time.Hour)}
	fulcio := httptest.NewServer(http.HandlerFunc(s.serveFulcio))
	t.Cleanup(fulcio.Close)
	rekor := httptest.NewServer(http.HandlerFunc(s.serveRekor))
	t.Cleanup(rekor.Close)
	s.FulcioURL, s.RekorURL = fulcio.URL, rekor.URL
	return s
}

// TrustedRoot is the trusted_root.json naming this Fulcio's CA and this Rekor's key.
func (s *SigstoreServices) TrustedRoot() ([]byte, error) {
	return s.sigstore.trustedRoot([]root.CertificateAuthority{&root.FulcioCertificateAuthority{
		Root:                s.caRoot,
		Intermediates:       []*x509.Certificate{s.caIntermediate},
		ValidityPeriodStart: s.caValidFrom,
		ValidityPeriodEnd:   time.Now().Add(time.Hour),
		URI:                 s.FulcioURL,
	}})
}

// CertifyAnotherKey makes Fulcio answer with a certificate for a key of its own instead of the
// one that asked: a broken or hostile certificate authority.
func (s *SigstoreServices) CertifyAnotherKey(on bool) { s.anotherKey.Store(on) }

// Certificates is how many certificates Fulcio issued; Entries how many entries Rekor logged.
func (s *SigstoreServices) Certificates() int64 { return s.certificates.Load() }

// Entries is how many entries Rekor logged.
func (s *SigstoreServices) Entries() int64 { return s.entries.Load() }

// IdentityToken is an OIDC identity token from issuer for subject (an e-mail address or a URI
// such as a CI workflow's), as an OIDC provider gives one to a CI job. It is not signed: this
// Fulcio reads the claims as given, where the real one checks the token with the issuer's keys.
func IdentityToken(issuer, subject string) string {
	claims := map[string]any{"iss": issuer, "sub": subject, "aud": "sigstore", "exp": time.Now().Add(10 * time.Minute).Unix()}
	if strings.Contains(subject, "@") && !strings.Contains(subject, "://") {
		claims["email"], claims["email_verified"] = subject, true
	}
	header, _ := json.Marshal(map[string]string{"alg": "none", "typ": "JWT"})
	body, _ := json.Marshal(claims)
	return base64.RawURLEncoding.EncodeToString(header) + "." + base64.RawURLEncoding.EncodeToString(body) + "."
}

// oidcIssuerV1 is Fulcio's certificate extension naming the OIDC issuer (1.3.6.1.4.1.57264.1.1).
var oidcIssuerV1 = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 1, 1}

// serveFulcio answers POST /api/v2/signingCert as Fulcio does.
func (s *SigstoreServices) serveFulcio(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/api/v2/signingCert" {
		http.NotFound(w, r)
		return
	}
	pem, err := s.issue(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.certificates.Add(1)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"signedCertificateEmbeddedSct": map[string]any{"chain": map[string]any{"certificates": pem}}})
}

// issue checks the request's token and proof of possession and returns the chain in PEM.
func (s *SigstoreServices) issue(r *http.Request) ([]string, error) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return nil, fmt.Errorf("no bearer token")
	}
	parts := strings.Split(token, ".")
	if len(parts) < 2 {
		return nil, fmt.Errorf("not a JWT")
	}
	rawClaims, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, err
	}
	var claims struct {
		Issuer  string `json:"iss"`
		Subject string `json:"sub"`
		Email   string `json:"email"`
	}
	if err := json.Unmarshal(rawClaims, &claims); err != nil {
		return nil, err
	}
	var req struct {
		PublicKeyRequest struct {
			PublicKey struct {
				Content string `json:"content"`
			} `json:"publicKey"`
			ProofOfPossession string `json:"proofOfPossession"`
		} `json:"publicKeyRequest"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		return nil, err
	}
	pub, err := cryptoutils.UnmarshalPEMToPublicKey([]byte(req.PublicKeyRequest.PublicKey.Content))
	if err != nil {
		return nil, err
	}
	subject := claims.Subject
	if claims.Email != "" {
		subject = claims.Email
	}
	// The key signed the token's subject: the requester holds it.
	proof, err := base64.StdEncoding.DecodeString(req.PublicKeyRequest.ProofOfPossession)
	if err != nil {
		return nil, err
	}
	verifier, err := signature.LoadVerifier(pub, crypto.SHA256)
	if err != nil {
		return nil, err
	}
	if err := verifier.VerifySignature(bytes.NewReader(proof), strings.NewReader(subject)); err != nil {
		return nil, fmt.Errorf("proof of possession: %w", err)
	}
	if s.anotherKey.Load() {
		other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		pub = other.Public()
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:    serial,
		NotBefore:       now.Add(-time.Minute),
		NotAfter:        now.Add(10 * time.Minute),
		KeyUsage:        x509.KeyUsageDigitalSignature,
		ExtKeyUsage:     []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning},
		ExtraExtensions: []pkix.Extension{{Id: oidcIssuerV1, Value: []byte(claims.Issuer)}},
	}
	if claims.Email != "" {
		tmpl.EmailAddresses = []string{claims.Email}
	} else {
		u, err := url.Parse(claims.Subject)
		if err != nil {
			return nil, err
		}
		tmpl.URIs = []*url.URL{u}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, s.caIntermediate, pub, s.intermediateKey)
	if err != nil {
		return nil, err
	}
	var chain []string
	for _, raw := range [][]byte{der, s.caIntermediate.Raw, s.caRoot.Raw} {
		c, err := x509.ParseCertificate(raw)
		if err != nil {
			return nil, err
		}
		p, err := cryptoutils.MarshalCertificateToPEM(c)
		if err != nil {
			return nil, err
		}
		chain = append(chain, string(p))
	}
	return chain, nil
}

// serveRekor answers POST /api/v1/log/entries as Rekor v1 does: the proposed entry is checked
// (for a dsse entry, the envelope's signatures against the certificate) and canonicalized, and
// the answer carries the entry with the log's signed entry timestamp and an inclusion proof.
func (s *SigstoreServices) serveRekor(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/api/v1/log/entries" {
		http.NotFound(w, r)
		return
	}
	entry, uuid, err := s.log(r)
	if err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]any{"code": http.StatusBadRequest, "message": err.Error()})
		return
	}
	s.entries.Add(1)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("ETag", uuid)
	w.Header().Set("Location", "/api/v1/log/entries/"+uuid)
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]models.LogEntryAnon{uuid: *entry})
}

func (s *SigstoreServices) log(r *http.Request) (*models.LogEntryAnon, string, error) {
	pe, err := models.UnmarshalProposedEntry(r.Body, runtime.JSONConsumer())
	if err != nil {
		return nil, "", err
	}
	impl, err := types.CreateVersionedEntry(pe)
	if err != nil {
		return nil, "", err
	}
	canonical, err := types.CanonicalizeEntry(r.Context(), impl)
	if err != nil {
		return nil, "", err
	}
	logID, err := s.sigstore.vs.RekorLogID()
	if err != nil {
		return nil, "", err
	}
	body := base64.StdEncoding.EncodeToString(canonical)
	// One entry per tree: the inclusion proof the virtual Sigstore makes is of a tree of one.
	integrated, index := time.Now().Unix(), int64(0)
	set, err := s.sigstore.vs.RekorSignPayload(tlog.RekorPayload{Body: body, IntegratedTime: integrated, LogIndex: index, LogID: logID})
	if err != nil {
		return nil, "", err
	}
	proof, err := s.sigstore.vs.GetInclusionProof(canonical)
	if err != nil {
		return nil, "", err
	}
	leaf := sha256.Sum256(append([]byte{0}, canonical...))
	return &models.LogEntryAnon{
		Body:           body,
		IntegratedTime: &integrated,
		LogID:          &logID,
		LogIndex:       &index,
		Verification:   &models.LogEntryAnonVerification{InclusionProof: proof, SignedEntryTimestamp: set},
	}, hex.EncodeToString(leaf[:]), nil
}
