package hosted

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// KubeconfigPolicy loosens what a connector kubeconfig may hold. The zero value is the
// secure default: inline credentials over verified TLS, nothing else.
type KubeconfigPolicy struct {
	// AllowExec lets a kubeconfig run an exec credential plugin inside the controller
	// (--insecure-kubeconfig-exec). Anyone who can write the connector Secret then runs
	// commands as the controller.
	AllowExec bool
	// AllowInsecureTLS lets a kubeconfig disable certificate verification or name a plain
	// http:// server (--insecure-kubeconfig-tls).
	AllowInsecureTLS bool
	// AllowAnyServer lets a kubeconfig name any server (--insecure-kubeconfig-any-server), not
	// only the hosted API server's own addresses (checkServer). Anyone who can write the
	// connector Secret then makes the controller send requests wherever they like.
	AllowAnyServer bool
}

// InsecureKubeconfigError says a connector kubeconfig holds something pkgsync refuses to use.
// It names the offending entry and field, never a file's content or whether it exists: the
// check runs before anything is read from the controller's file system.
type InsecureKubeconfigError struct {
	Namespace, Secret string
	// Field is the kubeconfig entry and field, for example `users["admin"].exec`.
	Field string
	// Problem says what is wrong with it and how to fix it.
	Problem string
}

func (e *InsecureKubeconfigError) Error() string {
	return fmt.Sprintf("connector Secret %s/%s: kubeconfig %s: %s", e.Namespace, e.Secret, e.Field, e.Problem)
}

// IsInsecureKubeconfig reports whether err says a connector kubeconfig was refused.
func IsInsecureKubeconfig(err error) bool {
	var ik *InsecureKubeconfigError
	return errors.As(err, &ik)
}

// restConfigFromKubeconfig builds the rest.Config of a connector kubeconfig from inline data
// only. client-go would honour every field of a kubeconfig: exec plugins run commands,
// tokenFile and the *-file fields read the controller's own files (its ServiceAccount token)
// and send them to a server the Secret's writer chooses, proxy-url routes the connection
// elsewhere; impersonation (as, as-groups, as-uid, as-user-extra) is refused too, not dropped,
// so that a kubeconfig meant to act with less privilege never acts with its credential's. Flux's runtime/client has the same rule (KubeConfigFromBytes, KubeConfig), but
// importing it links kubectl and cli-runtime into the controller, it drops exec and insecure
// TLS silently instead of saying which field was refused, and it asks the server about flow
// control while building the config; so the checks and the allow-list copy are written here.
//
// A refused field is returned as an *InsecureKubeconfigError without Namespace and Secret,
// which the caller fills in. serverField names the server used, for checkServer.
func restConfigFromKubeconfig(data []byte, policy KubeconfigPolicy) (cfg *rest.Config, serverField string, err error) {
	raw, err := clientcmd.Load(data)
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig does not parse: %w", err)
	}
	if refused := checkKubeconfig(raw, policy); refused != nil {
		return nil, "", refused
	}
	serverField = "server"
	if kctx := raw.Contexts[raw.CurrentContext]; kctx != nil {
		serverField = fmt.Sprintf("clusters[%q].server", kctx.Cluster)
	}
	for _, u := range raw.AuthInfos {
		if u != nil && u.Exec != nil {
			// Nobody is at the controller's terminal to answer a plugin's prompt.
			u.Exec.InteractiveMode = clientcmdapi.NeverExecInteractiveMode
		}
	}
	cfg, err = clientcmd.NewDefaultClientConfig(*raw, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig is not usable: %w", err)
	}
	// An allow-list copy: whatever client-go adds to rest.Config later is not carried over.
	out := &rest.Config{
		Host:        cfg.Host,
		APIPath:     cfg.APIPath,
		BearerToken: cfg.BearerToken,
		Username:    cfg.Username,
		Password:    cfg.Password,
		TLSClientConfig: rest.TLSClientConfig{
			ServerName: cfg.ServerName,
			CAData:     cfg.CAData,
			CertData:   cfg.CertData,
			KeyData:    cfg.KeyData,
		},
		DisableCompression: cfg.DisableCompression,
	}
	if policy.AllowInsecureTLS {
		out.Insecure = cfg.Insecure
	}
	if policy.AllowExec && cfg.ExecProvider != nil {
		out.ExecProvider = cfg.ExecProvider
	}
	return out, serverField, nil
}

// checkServer refuses a server that is not the hosted API server of namespace, unless the policy
// allows any. A connector Secret is written by whoever may write Secrets of that name in the
// namespace; if its server could be any URL, they would make the controller send discovery
// requests and probes to any service the controller reaches (in-cluster ones included) and read
// what answers in their resources' status. Accepted are the addresses HyperShift writes: the
// Service kube-apiserver of the namespace, bare (as in service-network-admin-kubeconfig) or
// qualified, any port; and, host and port, the endpoint the HostedCluster behind the namespace
// advertises (status.controlPlaneEndpoint, as in admin-kubeconfig). field names the server in
// the kubeconfig.
func checkServer(server, field, namespace string, hc *HostedCluster, policy KubeconfigPolicy) *InsecureKubeconfigError {
	if policy.AllowAnyServer {
		return nil
	}
	accepted := fmt.Sprintf("%s, %s.%s.svc or %s.%s.svc.cluster.local (any port)", serviceHost, serviceHost, namespace, serviceHost, namespace)
	advertised := ""
	if hc != nil {
		advertised = hc.Endpoint
	}
	if advertised != "" {
		accepted += fmt.Sprintf(", or %s, the endpoint HostedCluster %s/%s advertises", advertised, hc.Namespace, hc.Name)
	}
	u, err := url.Parse(server)
	if err == nil {
		switch strings.ToLower(u.Hostname()) {
		case serviceHost, serviceHost + "." + namespace + ".svc", serviceHost + "." + namespace + ".svc.cluster.local":
			return nil
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
		}
		if advertised != "" && strings.EqualFold(net.JoinHostPort(u.Hostname(), port), advertised) {
			return nil
		}
	}
	return &InsecureKubeconfigError{Field: field, Problem: fmt.Sprintf("the server is not the hosted API server of namespace %s: accepted are %s (start the controller with --insecure-kubeconfig-any-server to allow any server)",
		namespace, accepted)}
}

// checkKubeconfig returns the first refused field of every cluster and user entry (not only
// the current context's: an entry that is never used should not carry a file reference either).
func checkKubeconfig(cfg *clientcmdapi.Config, policy KubeconfigPolicy) *InsecureKubeconfigError {
	for _, name := range sortedKeys(cfg.Clusters) {
		c := cfg.Clusters[name]
		if c == nil {
			continue
		}
		field := func(f string) string { return fmt.Sprintf("clusters[%q].%s", name, f) }
		if c.CertificateAuthority != "" {
			return &InsecureKubeconfigError{Field: field("certificate-authority"), Problem: fileRefused + "certificate-authority-data"}
		}
		if c.ProxyURL != "" {
			return &InsecureKubeconfigError{Field: field("proxy-url"), Problem: "a proxy is not allowed; the controller connects to the hosted API server directly"}
		}
		if !policy.AllowInsecureTLS {
			if c.InsecureSkipTLSVerify {
				return &InsecureKubeconfigError{Field: field("insecure-skip-tls-verify"), Problem: "TLS verification may not be disabled (start the controller with --insecure-kubeconfig-tls to allow it)"}
			}
			// client-go reads a server without a scheme ("10.0.0.1:80") as plain http.
			if u, err := url.Parse(c.Server); err != nil || u.Scheme != "https" || u.Host == "" {
				return &InsecureKubeconfigError{Field: field("server"), Problem: "the server must be an https:// URL (start the controller with --insecure-kubeconfig-tls to allow plain http)"}
			}
		}
	}
	for _, name := range sortedKeys(cfg.AuthInfos) {
		u := cfg.AuthInfos[name]
		if u == nil {
			continue
		}
		field := func(f string) string { return fmt.Sprintf("users[%q].%s", name, f) }
		switch {
		case u.TokenFile != "":
			return &InsecureKubeconfigError{Field: field("tokenFile"), Problem: fileRefused + "token"}
		case u.ClientCertificate != "":
			return &InsecureKubeconfigError{Field: field("client-certificate"), Problem: fileRefused + "client-certificate-data"}
		case u.ClientKey != "":
			return &InsecureKubeconfigError{Field: field("client-key"), Problem: fileRefused + "client-key-data"}
		case u.Exec != nil && !policy.AllowExec:
			return &InsecureKubeconfigError{Field: field("exec"), Problem: "exec credential plugins are not allowed (start the controller with --insecure-kubeconfig-exec to allow them)"}
		case u.AuthProvider != nil:
			return &InsecureKubeconfigError{Field: field("auth-provider"), Problem: "auth-provider plugins are not allowed; use a client certificate or a token"}
		case u.Impersonate != "":
			return &InsecureKubeconfigError{Field: field("as"), Problem: impersonationRefused}
		case len(u.ImpersonateGroups) > 0:
			return &InsecureKubeconfigError{Field: field("as-groups"), Problem: impersonationRefused}
		case u.ImpersonateUID != "":
			return &InsecureKubeconfigError{Field: field("as-uid"), Problem: impersonationRefused}
		case len(u.ImpersonateUserExtra) > 0:
			return &InsecureKubeconfigError{Field: field("as-user-extra"), Problem: impersonationRefused}
		}
	}
	return nil
}

// impersonationRefused explains a refused impersonation field. The controller does not
// impersonate on hosted clusters: dropping the field would run the kubeconfig with its
// credential's own privileges (system:masters for HyperShift's), more than its writer meant.
const impersonationRefused = "impersonation is not supported for hosted clusters, and the kubeconfig is refused rather than used with more privilege than it asks for; give a credential of the identity to act as"

// fileRefused starts the problem of a file reference; the inline field to use follows.
const fileRefused = "files are never read from the controller's file system; embed the data inline in "

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
