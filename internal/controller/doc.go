// Package controller holds the reconcilers that wire source, render and apply together for
// Package, ClusterPackage, ObjectDeployment and ClusterObjectDeployment resources.
package controller
