// Package schema checks rendered Kubernetes objects as the API server would, offline: built-in
// kinds against the schemas client-go ships for the Kubernetes version pkgsync is built
// against, custom resources against the CustomResourceDefinitions it is given, and the names,
// enums, images and sizes the API server's validation refuses. It knows nothing of packages:
// render imports it and says where each object came from, so it must never import
// pkgsync.dev/pkgsync/render (or any other pkgsync package).
package schema
