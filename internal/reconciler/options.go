package reconciler

import (
	"time"

	"pkgsync.dev/pkgsync/internal/cloudauth"
	"pkgsync.dev/pkgsync/internal/wakes"
	"pkgsync.dev/pkgsync/render"
	"pkgsync.dev/pkgsync/source"
)

// FieldOwner is the field manager of status patches.
const FieldOwner = "pkgsync"

// Options configure the reconcilers.
type Options struct {
	// Namespace is the controller's namespace: where ClusterPackages' pull secrets live.
	Namespace string
	// KubernetesVersion of the management cluster, for templates.
	KubernetesVersion string
	// OpenShiftVersion of the management cluster, for templates and constraints; empty when it
	// is not OpenShift.
	OpenShiftVersion string
	// Proxy is the management cluster's egress proxy, for templates; nil when none.
	Proxy *render.Proxy
	// ProgressInterval is how soon a pass waiting for availability is looked at again.
	ProgressInterval time.Duration
	// RetryInterval is how soon a failed reconciliation is retried, unless the resource says.
	RetryInterval time.Duration
	// AllowCrossNamespace lets namespaced resources create cluster-scoped objects and objects in
	// other namespaces on the management cluster.
	AllowCrossNamespace bool
	// HostedTeardownTimeout is how long deletion waits for an unreachable hosted cluster before
	// letting its objects go.
	HostedTeardownTimeout time.Duration
	// HostedNamespaceRule decides which namespaces are hosted-control-plane namespaces, the only
	// ones whose resources may have hosted-cluster phases. Empty means HostedNamespaceByHostedCluster.
	HostedNamespaceRule HostedNamespaceRule
	// DefaultServiceAccount, when set, is impersonated on the management cluster by namespaced
	// resources that name no ServiceAccount of their own (and by every ObjectDeployment): the
	// ServiceAccount of that name in the resource's namespace.
	DefaultServiceAccount string
	// Cloud exchanges workload identity for registry credentials (spec.provider aws, azure,
	// gcp); nil refuses those providers.
	Cloud *cloudauth.Exchanger
	// RequireSignatures refuses Packages and ClusterPackages without spec.verify, and
	// HostedClusterPackages without spec.template.spec.verify.
	RequireSignatures bool
	// VerifyInterval bounds how long a signature verdict (a digest verified with a key set or
	// a trusted root and identities) is remembered: after it, the signature is read and
	// checked again, so a deleted or replaced signature counts. 10 minutes when zero.
	VerifyInterval time.Duration
	// Wakes, when set, is woken by registry notifications (NewRegistryWakes): Packages,
	// ClusterPackages and HostedClusterPackages that follow a pushed repository reconcile at
	// once and resolve the tag afresh.
	Wakes *wakes.RegistryWakes
	// ImageOverrides relocate the .images templates see (--registry-host-overrides,
	// --image-prefix-overrides); the source client reads packages through the same overrides.
	ImageOverrides source.Overrides
	// ShardLabelKeys are the label keys --watch-label-selector reads (ShardLabelKeys): a
	// fleet's member Packages carry the fleet's values of them, so that the controller that
	// reconciles the fleet reconciles its members too.
	ShardLabelKeys []string
	// RenderCacheBytes bounds the estimated memory of the rendered packages kept (their objects
	// encoded: see storedRender); 32 MiB when zero.
	RenderCacheBytes int64
	// ApplyConcurrency bounds the objects one reconcile applies at once within a phase
	// (--apply-concurrency-per-package); apply.DefaultConcurrency when zero.
	ApplyConcurrency int
	// MaxConcurrentApplies bounds the objects applied at once by every reconcile together
	// (--max-concurrent-applies); unbounded when zero.
	MaxConcurrentApplies int

	// HyperShift says the management cluster serves HyperShift's HostedCluster API (set when the
	// controller starts): Package Operator packages then see .environment.hyperShift everywhere.
	HyperShift bool
}

func (o Options) WithDefaults() Options {
	if o.ProgressInterval <= 0 {
		o.ProgressInterval = 5 * time.Second
	}
	if o.RetryInterval <= 0 {
		o.RetryInterval = 30 * time.Second
	}
	if o.HostedTeardownTimeout <= 0 {
		o.HostedTeardownTimeout = 2 * time.Minute
	}
	if o.HostedNamespaceRule == "" {
		o.HostedNamespaceRule = HostedNamespaceByHostedCluster
	}
	if o.RenderCacheBytes <= 0 {
		o.RenderCacheBytes = 32 << 20
	}
	return o
}

// RelocateImage returns the rewrite of the .images templates see, or nil without overrides.
func (o Options) RelocateImage() func(string) string {
	if o.ImageOverrides.IsZero() {
		return nil
	}
	return o.ImageOverrides.Image
}
