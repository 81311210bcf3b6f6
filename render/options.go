package render

// Options are the inputs of a render besides the package tree: who installs the package, with
// what configuration, into which environment.
type Options struct {
	// Name of the Package object installing the package; .package.metadata.name in templates.
	// Empty means the manifest's metadata.name.
	Name string
	// Namespace of the Package object; empty for a ClusterPackage.
	Namespace string
	// Labels of the Package object. A Package Operator package sees them as it does there:
	// without labels (nil or empty) a string map, where index of a missing key gives ""; with
	// some a map decoded from JSON, where it gives no value. In a test case's Options an empty
	// map is one the case wrote (labels: {}), a map decoded from JSON as there.
	Labels map[string]string
	// Annotations of the Package object, seen as Labels are.
	Annotations map[string]string
	// Component selects a component of a multi-component package (components/NAME); empty
	// means the root package.
	Component string
	// Image is the package image reference; .package.image in templates.
	Image string

	// Config is the package configuration as a JSON (or YAML) object. Empty means {}.
	Config []byte

	// RelocateImage, when set, rewrites each image templates see as .images.NAME (from the
	// lock file, or spec.images as written): the registry overrides of a disconnected cluster.
	// Not part of an options fingerprint (a func does not marshal): callers that cache renders
	// use one rewrite for every render.
	RelocateImage func(image string) string `json:"-"`

	// Environment describes the clusters the package is rendered for.
	Environment Environment
}

// Environment is what templates see under .environment.
type Environment struct {
	// KubernetesVersion of the management cluster, for example v1.36.3.
	KubernetesVersion string
	// OpenShiftVersion of the management cluster (ClusterVersion's desired version), empty
	// when it is not OpenShift.
	OpenShiftVersion string
	// OpenShiftManaged is Package Operator's .environment.openShift.managed (the data of a
	// managed OpenShift cluster), nil when absent. Only template test cases set it: pkgsync does
	// not detect managed OpenShift.
	OpenShiftManaged *ManagedOpenShift
	// HyperShift says the management cluster serves HyperShift's HostedCluster API. Package
	// Operator then shows every Package Operator package .environment.hyperShift, its
	// hostedCluster null outside a hosted-control-plane namespace. Implied by HostedCluster.
	HyperShift bool
	// Proxy is the cluster-wide egress proxy (OpenShift's Proxy object), nil when none.
	Proxy *Proxy
	// HostedCluster is set when the package is installed into a hosted-control-plane namespace.
	HostedCluster *HostedCluster
}

// ManagedOpenShift describes a managed OpenShift cluster, as Package Operator's context does.
type ManagedOpenShift struct {
	// Data are the key-value pairs describing it.
	Data map[string]string
}

// Proxy is a cluster-wide egress proxy configuration.
type Proxy struct {
	HTTPProxy  string
	HTTPSProxy string
	NoProxy    string
}

// HostedCluster identifies the HyperShift HostedCluster behind a hosted-control-plane namespace.
type HostedCluster struct {
	// Name of the HostedCluster object.
	Name string
	// Namespace of the HostedCluster object (not the hosted-control-plane namespace).
	Namespace string
	// HostedClusterNamespace is the hosted-control-plane namespace on the management cluster.
	HostedClusterNamespace string
	// Labels and Annotations of the HostedCluster object.
	Labels, Annotations map[string]string
	// NodeSelector is the HostedCluster's spec.nodeSelector: where its control plane's pods run.
	NodeSelector map[string]string
	// PlatformType is the HostedCluster's spec.platform.type (AWS, Azure, KubeVirt, None, ...).
	PlatformType string
}
