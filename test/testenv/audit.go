package testenv

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// auditPolicy logs every request once, when its response is complete, without bodies.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: Metadata
`

// configureAudit has env's kube-apiserver write its audit log into dir, synchronously (the
// log backend's blocking mode: a request is logged before it is answered), and returns the
// log's path.
func configureAudit(env *envtest.Environment, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("audit log directory: %w", err)
	}
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return "", fmt.Errorf("audit policy: %w", err)
	}
	log := filepath.Join(dir, "audit.log")
	env.ControlPlane.GetAPIServer().Configure().
		Set("audit-policy-file", policy).
		Set("audit-log-path", log).
		Set("audit-log-mode", "blocking").
		Set("audit-log-maxsize", "0")
	return log, nil
}

// Requests counts the requests user sent that the API server has answered, by verb and what
// they were for: "patch configmaps", "get namespaces", "create events", and for requests
// outside the resource API (discovery, health) "get /version". It needs ControlPlaneOptions.Audit.
func (c *ControlPlane) Requests(user string) (map[string]int, error) {
	if c.auditLog == "" {
		return nil, fmt.Errorf("%s control plane: started without an audit log", c.Name)
	}
	f, err := os.Open(c.auditLog)
	if err != nil {
		return nil, fmt.Errorf("%s control plane: audit log: %w", c.Name, err)
	}
	defer f.Close()
	out := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		var ev auditv1.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.User.Username != user {
			continue // a line cut short while the server writes it, or another user's
		}
		switch {
		case ev.ObjectRef != nil && ev.ObjectRef.Resource != "":
			what := ev.ObjectRef.Resource
			if ev.ObjectRef.Subresource != "" {
				what += "/" + ev.ObjectRef.Subresource
			}
			out[ev.Verb+" "+what]++
		default:
			path, _, _ := strings.Cut(ev.RequestURI, "?")
			out[ev.Verb+" "+path]++
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s control plane: read audit log: %w", c.Name, err)
	}
	return out, nil
}
