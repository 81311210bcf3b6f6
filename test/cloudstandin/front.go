package cloudstandin

import (
	"encoding/json"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
)

// authorizer decides a registry request from its basic credentials and repository ("" for the
// /v2/ ping): http.StatusOK, or the status and message to refuse it with.
type authorizer func(username, password, repository string) (int, string)

// frontHandler is a registry's authentication in front of a real registry (upstream, plain
// HTTP): the Docker registry API with basic authentication, as ECR and Artifact Registry answer
// it, forwarding what it allows.
func frontHandler(authorize authorizer, upstream string) http.Handler {
	target := &url.URL{Scheme: "http", Host: upstream}
	proxy := httputil.NewSingleHostReverseProxy(target)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/v2/") {
			http.NotFound(w, r)
			return
		}
		user, password, _ := r.BasicAuth()
		status, msg := authorize(user, password, repositoryOf(r.URL.Path))
		if status != http.StatusOK {
			w.Header().Set("Content-Type", "application/json")
			if status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Basic realm="stand-in registry"`)
			}
			w.WriteHeader(status)
			code := "UNAUTHORIZED"
			if status == http.StatusForbidden {
				code = "DENIED"
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"errors": []map[string]string{{"code": code, "message": msg}}})
			return
		}
		// The registry builds the upload URLs it answers from the name it was asked by and the
		// scheme the front says, so that a push goes on through the front.
		r.Header.Del("Authorization")
		r.Header.Set("X-Forwarded-Proto", "https")
		proxy.ServeHTTP(w, r)
	})
}

// repositoryOf is the repository of a registry API path, "" for the ping and the catalog.
func repositoryOf(path string) string {
	rest := strings.TrimPrefix(path, "/v2/")
	for _, sep := range []string{"/manifests/", "/blobs/", "/tags/", "/referrers/"} {
		if i := strings.LastIndex(rest, sep); i > 0 {
			return rest[:i]
		}
	}
	return ""
}
