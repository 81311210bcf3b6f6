package main

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// kubeFlags are kubectl's flags that select the management cluster, one set for every command
// that talks to a cluster: --kubeconfig FILE, --context NAME and, without --kubeconfig,
// $KUBECONFIG (a list of files, ':'-separated, merged as kubectl merges them: the first file to
// set a value wins) or ~/.kube/config. They are cli-runtime's genericclioptions.ConfigFlags, the
// type kubectl itself binds, so a kubeconfig means to pkgsync what it means to kubectl; only
// --kubeconfig and --context are bound (not ConfigFlags.AddFlags, which would add kubectl's
// whole set of overrides and its own --namespace, whose meaning differs per pkgsync command:
// each command keeps its -n/--namespace).
//
// This reads the user's own kubeconfig on the user's machine, as kubectl does: its exec
// credential plugins and auth providers run, as they do for kubectl. Kubeconfigs read from the
// cluster (the controller's connector Secrets) go through hosted.KubeconfigPolicy instead.
type kubeFlags struct {
	config *genericclioptions.ConfigFlags
	// inClusterFirst prefers the in-cluster configuration to ~/.kube/config when neither flag
	// nor $KUBECONFIG names one: the controller's order (controller-runtime's), which runs in a
	// Pod. The CLI uses kubectl's order: in-cluster only when no kubeconfig is found.
	inClusterFirst bool
}

// newKubeFlags binds --kubeconfig (described by kubeconfigUsage) and --context to fs.
func newKubeFlags(fs *pflag.FlagSet, kubeconfigUsage string) *kubeFlags {
	k := &kubeFlags{config: &genericclioptions.ConfigFlags{KubeConfig: new(string), Context: new(string)}}
	fs.StringVar(k.config.KubeConfig, "kubeconfig", "", kubeconfigUsage)
	fs.StringVar(k.config.Context, "context", "", "Kubeconfig context to use (default: the kubeconfig's current-context)")
	return k
}

const kubeconfigUsage = "Kubeconfig of the management cluster (default: $KUBECONFIG, ~/.kube/config, or in-cluster)"

// errNoKubeconfig is the error when no flag, file or in-cluster configuration names a cluster
// (kubectl would try http://localhost:8080).
var errNoKubeconfig = errors.New("no cluster configured: pass --kubeconfig FILE, set $KUBECONFIG, or write ~/.kube/config")

// restConfig is the client configuration of the cluster the flags select.
func (k *kubeFlags) restConfig() (*rest.Config, error) {
	explicit := *k.config.KubeConfig != "" || *k.config.Context != ""
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if k.inClusterFirst && !explicit && len(rules.Precedence) == 1 && rules.Precedence[0] == clientcmd.RecommendedHomeFile {
		if cfg, err := rest.InClusterConfig(); err == nil {
			return cfg, nil
		}
	}
	loader := k.config.ToRawKubeConfigLoader()
	raw, err := loader.RawConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig%s: %w", k.describe(), err)
	}
	if len(raw.Contexts) == 0 && !explicit {
		// ConfigFlags falls back to localhost:8080 when nothing is configured: refuse instead,
		// unless in a Pod.
		if cfg, err := rest.InClusterConfig(); err == nil {
			return cfg, nil
		}
		return nil, errNoKubeconfig
	}
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig%s: %w", k.describe(), err)
	}
	return cfg, nil
}

// namespace is kubectl's default for -n: the namespace of the kubeconfig context the flags
// select, "default" when the context sets none, the Pod's own namespace in a cluster without a
// kubeconfig (clientcmd's DeferredLoadingClientConfig.Namespace, as kubectl reads it).
func (k *kubeFlags) namespace() (string, error) {
	ns, _, err := k.config.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", fmt.Errorf("read the namespace of the kubeconfig context%s (or pass -n NAMESPACE): %w", k.describe(), err)
	}
	return ns, nil
}

// defaultNamespace sets *namespace to the kubeconfig context's namespace when fs's
// -n/--namespace was not given, as kubectl does for every namespaced command.
func (k *kubeFlags) defaultNamespace(fs *pflag.FlagSet, namespace *string) error {
	if fs.Changed("namespace") {
		return nil
	}
	ns, err := k.namespace()
	if err != nil {
		return err
	}
	*namespace = ns
	return nil
}

// describe names the file and context given, for errors.
func (k *kubeFlags) describe() string {
	s := ""
	if f := *k.config.KubeConfig; f != "" {
		s += " " + f
	}
	if c := *k.config.Context; c != "" {
		s += fmt.Sprintf(" (context %s)", c)
	}
	return s
}
