// Package hosted reaches the API servers of HyperShift hosted clusters from the management
// cluster, through the connector kubeconfig Secret in each hosted-control-plane namespace.
package hosted
