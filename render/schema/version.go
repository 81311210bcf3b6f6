package schema

// kubernetesVersion is the Kubernetes release whose schemas the checker knows: that of the
// k8s.io/api and k8s.io/client-go modules pkgsync is built with (v0.36.x is Kubernetes 1.36).
// TestKubernetesVersion keeps the two in step.
const kubernetesVersion = "1.36"

// KubernetesVersion is the Kubernetes release (major.minor) whose built-in kinds the checker
// knows, for messages that say what was checked.
func KubernetesVersion() string { return kubernetesVersion }
