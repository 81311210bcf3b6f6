package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// ControlPlane is a real kube-apiserver with its etcd. There is no kube-controller-manager:
// nothing sets the status of Deployments, so tests and the demo play that part.
type ControlPlane struct {
	// Name tells control planes apart in messages and file names.
	Name string
	// Config is an admin (system:masters) client configuration.
	Config *rest.Config
	// KubeconfigPath is an admin kubeconfig file for kubectl and the pkgsync CLI.
	KubeconfigPath string

	// auditLog is the kube-apiserver's audit log, empty unless ControlPlaneOptions.Audit.
	auditLog string

	// users serialises AddUser: envtest's user provisioning is not safe for concurrent use,
	// and parallel tests provision users of one control plane.
	users sync.Mutex

	env *envtest.Environment
}

// ControlPlaneOptions configure a control plane.
type ControlPlaneOptions struct {
	// Audit has kube-apiserver log every request it answers (its audit log, level Metadata),
	// so that a test can count what a client sent by user (ControlPlane.Requests).
	Audit bool
}

// StartControlPlane starts a control plane and writes its admin kubeconfig into dir.
func StartControlPlane(name, dir string) (*ControlPlane, error) {
	return StartControlPlaneWith(name, dir, ControlPlaneOptions{})
}

// StartControlPlaneWith starts a control plane configured by opts and writes its admin
// kubeconfig into dir.
func StartControlPlaneWith(name, dir string, opts ControlPlaneOptions) (*ControlPlane, error) {
	bin, err := binary("kube-apiserver")
	if err != nil {
		return nil, err
	}
	binDir := filepath.Dir(bin)
	if _, err := binary("etcd"); err != nil {
		return nil, err
	}
	env := &envtest.Environment{BinaryAssetsDirectory: binDir}
	auditLog := ""
	if opts.Audit {
		if auditLog, err = configureAudit(env, filepath.Join(dir, name+"-audit")); err != nil {
			return nil, err
		}
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("start %s control plane: %w", name, err)
	}
	cp := &ControlPlane{Name: name, Config: cfg, env: env, auditLog: auditLog}
	kubeconfig, err := cp.Kubeconfig("pkgsync-admin", "system:masters")
	if err != nil {
		_ = cp.Stop()
		return nil, err
	}
	cp.KubeconfigPath = filepath.Join(dir, name+".kubeconfig")
	if err := os.WriteFile(cp.KubeconfigPath, kubeconfig, 0o600); err != nil {
		_ = cp.Stop()
		return nil, fmt.Errorf("write kubeconfig of %s control plane: %w", name, err)
	}
	return cp, nil
}

// NewControlPlane starts a control plane for a test and stops it when the test ends.
func NewControlPlane(t testing.TB, name string) *ControlPlane {
	t.Helper()
	cp, err := StartControlPlane(name, t.TempDir())
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("testenv: stop %s control plane: %v", name, err)
		}
	})
	return cp
}

// Kubeconfig provisions a client-certificate user on the control plane and returns a kubeconfig
// for it, the way HyperShift's connector Secrets carry one. A second user gives a second,
// independent set of credentials for the same API server (certificate rotation in tests).
func (c *ControlPlane) Kubeconfig(user string, groups ...string) ([]byte, error) {
	c.users.Lock()
	u, err := c.env.AddUser(envtest.User{Name: user, Groups: groups}, nil)
	c.users.Unlock()
	if err != nil {
		return nil, fmt.Errorf("add user %s to %s control plane: %w", user, c.Name, err)
	}
	return KubeconfigFor(c.Name, u.Config())
}

// ConnectorKubeconfig provisions a system:masters client-certificate user on the control plane
// and returns a kubeconfig for it laid out as HyperShift's control-plane operator writes the one
// in service-network-admin-kubeconfig: cluster "cluster", user "admin", context "admin" in
// namespace default. Its server is this control plane's address, not HyperShift's
// https://kube-apiserver:6443, which resolves only inside a hosted-control-plane namespace; the
// tests advertise the address as the HostedCluster's status.controlPlaneEndpoint, which pkgsync
// accepts as the hosted API server too. Another user gives another, independent credential for
// the same server (certificate rotation).
func (c *ControlPlane) ConnectorKubeconfig(user string) ([]byte, error) {
	c.users.Lock()
	u, err := c.env.AddUser(envtest.User{Name: user, Groups: []string{"system:masters"}}, nil)
	c.users.Unlock()
	if err != nil {
		return nil, fmt.Errorf("add user %s to %s control plane: %w", user, c.Name, err)
	}
	cfg := u.Config()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["cluster"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["admin"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "admin", Namespace: "default"}
	kc.CurrentContext = "admin"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		return nil, fmt.Errorf("write kubeconfig for %s: %w", user, err)
	}
	return data, nil
}

// KubeconfigFor serialises a certificate-authenticated rest.Config as a kubeconfig.
func KubeconfigFor(name string, cfg *rest.Config) ([]byte, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	data, err := clientcmd.Write(*kc)
	if err != nil {
		return nil, fmt.Errorf("write kubeconfig for %s: %w", name, err)
	}
	return data, nil
}

// Stop stops kube-apiserver and etcd and removes their data.
func (c *ControlPlane) Stop() error {
	if c.env == nil {
		return nil
	}
	if err := c.env.Stop(); err != nil {
		return fmt.Errorf("stop %s control plane: %w", c.Name, err)
	}
	c.env = nil
	return nil
}
