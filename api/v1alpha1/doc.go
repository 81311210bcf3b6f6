// Package v1alpha1 holds pkgsync's API: the Package, ClusterPackage and ObjectDeployment custom
// resources, and the PackageManifest format that package authors write.
//
// +kubebuilder:object:generate=true
// +groupName=pkgsync.dev
package v1alpha1
