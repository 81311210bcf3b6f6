// Package render turns a package tree and its configuration into ordered phases of Kubernetes objects.
package render
