package main

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/rest"
)

// counts maps "VERB resource[/subresource]" to a number of requests.
type counts map[string]int

// minus returns c - before.
func (c counts) minus(before counts) counts {
	out := counts{}
	for k, v := range c {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// sum adds the entries whose verb is one of verbs and whose resource passes keep (nil: all).
func (c counts) sum(verbs []string, keep func(resource string) bool) int {
	n := 0
	for k, v := range c {
		verb, resource, _ := strings.Cut(k, " ")
		for _, want := range verbs {
			if verb == want && (keep == nil || keep(resource)) {
				n += v
			}
		}
	}
	return n
}

// String lists the entries, sorted, for the report.
func (c counts) String() string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", strings.ReplaceAll(k, " ", ":"), c[k]))
	}
	return strings.Join(parts, ",")
}

var (
	writeVerbs = []string{"POST", "PUT", "PATCH", "DELETE", "APPLY"}
	readVerbs  = []string{"GET", "LIST"}
)

// managedResources are the kinds of the fleet package.
func managedResource(resource string) bool {
	switch resource {
	case "configmaps", "secrets", "serviceaccounts", "namespaces":
		return true
	}
	return false
}

// apiCounter counts the requests a Kubernetes client sends, by verb and resource. It wraps the
// controller's rest.Config transport: client-side, so it sees exactly what the controller asks.
type apiCounter struct {
	mu sync.Mutex
	c  counts
}

func (a *apiCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		key := classify(r)
		a.mu.Lock()
		if a.c == nil {
			a.c = counts{}
		}
		a.c[key]++
		a.mu.Unlock()
		return rt.RoundTrip(r)
	})
}

func (a *apiCounter) snapshot() counts {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.c)
}

// classify names a request "VERB resource[/subresource]" the way the API server's
// apiserver_request_total does: LIST and WATCH for collections, discovery for the rest.
func classify(r *http.Request) string {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	var rest []string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		rest = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		rest = parts[3:]
	}
	if len(rest) == 0 {
		return r.Method + " discovery"
	}
	resource, name, sub := rest[0], "", ""
	if resource == "namespaces" && len(rest) >= 3 {
		rest = rest[2:]
		resource = rest[0]
	}
	if len(rest) >= 2 {
		name = rest[1]
	}
	if len(rest) >= 3 {
		sub = "/" + rest[2]
	}
	verb := r.Method
	switch {
	case verb == http.MethodGet && r.URL.Query().Get("watch") == "true":
		verb = "WATCH"
	case verb == http.MethodGet && name == "":
		verb = "LIST"
	case verb == http.MethodPatch && r.Header.Get("Content-Type") == "application/apply-patch+yaml":
		verb = "APPLY"
	}
	return verb + " " + resource + sub
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// serverCounts reads apiserver_request_total from an API server: what every client asked of it,
// counted by the server. The hosted clients are built inside pkgsync from connector Secrets
// (hosted.Options has no transport hook), so their requests are counted here.
func serverCounts(ctx context.Context, cfg *rest.Config) (counts, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("metrics client: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read API server metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("read API server metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parse API server metrics: %w", err)
	}
	out := counts{}
	for _, m := range families["apiserver_request_total"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["resource"] == "" {
			continue
		}
		key := labels["verb"] + " " + labels["resource"]
		if labels["subresource"] != "" {
			key += "/" + labels["subresource"]
		}
		out[key] += int(m.GetCounter().GetValue())
	}
	return out, nil
}

// registryProxy is a reverse proxy in front of the registry that counts what passes through:
// the controller's registry traffic, measured outside the controller.
type registryProxy struct {
	Host   string
	server *http.Server

	mu sync.Mutex
	c  counts
}

func startRegistryProxy(target string) (*registryProxy, error) {
	u, err := url.Parse("http://" + target)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the registry proxy: %w", err)
	}
	p := &registryProxy{Host: ln.Addr().String(), c: counts{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	p.server = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		api := "other"
		for _, a := range []string{"manifests", "blobs", "tags"} {
			if strings.Contains(r.URL.Path, "/"+a+"/") {
				api = a
			}
		}
		p.mu.Lock()
		p.c[r.Method+" "+api]++
		p.mu.Unlock()
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = p.server.Serve(ln) }()
	return p, nil
}

func (p *registryProxy) snapshot() counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.c)
}

func (p *registryProxy) Close() error { return p.server.Close() }
