package verify

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	crsource "sigs.k8s.io/controller-runtime/pkg/source"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/reconciler"
	"pkgsync.dev/pkgsync/source"
)

// +kubebuilder:rbac:groups=pkgsync.dev,resources=trustpolicies,verbs=get;list;watch

// dockerHub is the one spelling of Docker Hub's registry; the other names reach the same
// repositories (the source client sends docker.io to registry-1.docker.io).
const dockerHub = "docker.io"

var dockerHubAliases = []string{"docker.io", "index.docker.io", "registry-1.docker.io", "registry.hub.docker.com"}

// repositoryPrefix is a TrustPolicy's repository prefix in the spelling images are compared in.
// A tenant names the image, so every spelling that reaches the same repository must compare
// equal: a policy that another spelling escapes protects nothing.
type repositoryPrefix struct {
	// host is lower case, without a trailing dot; an IP address in its canonical form.
	host string
	// port is "" for every port (none given, or a default one: 443, 80).
	port string
	// path is "" for every repository of the registry, else a repository path without a
	// trailing slash.
	path string
}

// parseRepositoryPrefix reads REGISTRY[/PATH] as the CRD's pattern admits it.
func parseRepositoryPrefix(s string) repositoryPrefix {
	hostport, path, _ := strings.Cut(strings.TrimSuffix(s, "/"), "/")
	host, port := canonicalHost(hostport)
	return repositoryPrefix{host: host, port: port, path: strings.ToLower(path)}
}

// canonicalHost splits host[:port] into the spelling hosts are compared in: lower case, no
// trailing dot, an IP address in canonical form, Docker Hub's names as docker.io, and the
// default ports (443 for HTTPS, 80 for plain HTTP) as no port, since the source client
// reaches a host without a port on them.
func canonicalHost(hostport string) (host, port string) {
	host = hostport
	if strings.HasPrefix(hostport, "[") {
		if end := strings.LastIndex(hostport, "]"); end > 0 {
			host = hostport[1:end]
			port = strings.TrimPrefix(hostport[end+1:], ":")
		}
	} else if i := strings.LastIndex(hostport, ":"); i >= 0 {
		host, port = hostport[:i], hostport[i+1:]
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if addr, err := netip.ParseAddr(host); err == nil {
		host = addr.Unmap().WithZone("").String()
	}
	if slices.Contains(dockerHubAliases, host) {
		host = dockerHub
	}
	if n, err := strconv.Atoi(port); err == nil {
		port = strconv.Itoa(n) // 0443 is 443
	}
	if port == "443" || port == "80" {
		port = ""
	}
	return host, port
}

// covers tells whether the image ref names is under the prefix, on path boundaries.
func (p repositoryPrefix) covers(ref source.Reference) bool {
	host, port := canonicalHost(ref.Registry)
	if host != p.host || (p.port != "" && port != p.port) {
		return false
	}
	if p.path == "" {
		return true
	}
	for _, repo := range repositorySpellings(host, strings.ToLower(ref.Repository)) {
		if repo == p.path || strings.HasPrefix(repo, p.path+"/") {
			return true
		}
	}
	return false
}

// repositorySpellings are the names of one repository: on Docker Hub, x is library/x.
func repositorySpellings(host, repo string) []string {
	if host != dockerHub {
		return []string{repo}
	}
	if !strings.Contains(repo, "/") {
		return []string{repo, "library/" + repo}
	}
	if short, ok := strings.CutPrefix(repo, "library/"); ok && !strings.Contains(short, "/") {
		return []string{repo, short}
	}
	return []string{repo}
}

// policyCovers tells whether one of the policy's repository prefixes covers ref.
func policyCovers(p *v1alpha1.TrustPolicy, ref source.Reference) bool {
	for _, r := range p.Spec.Repositories {
		if parseRepositoryPrefix(r).covers(ref) {
			return true
		}
	}
	return false
}

// trustPolicyField names a policy's verification settings in messages.
func trustPolicyField(name string) string { return fmt.Sprintf("TrustPolicy %q spec.verify", name) }

// coveringPolicies lists the TrustPolicies that cover ref, by name, from the cache. A failed
// list is an error, not "no policy": a policy that cannot be read is not waived.
func coveringPolicies(ctx context.Context, reader client.Reader, ref source.Reference) ([]v1alpha1.TrustPolicy, error) {
	var list v1alpha1.TrustPolicyList
	if err := reader.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("list TrustPolicies: %w", err)
	}
	var out []v1alpha1.TrustPolicy
	for _, p := range list.Items {
		if policyCovers(&p, ref) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b v1alpha1.TrustPolicy) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// CoveredResources maps a TrustPolicy to reconcile requests for the resources of one kind
// whose image it covers, so that a policy created, changed or deleted applies at once, not at
// each resource's next interval. On an update the old and the new policy are both mapped, so
// resources a change uncovers are reconciled too.
func CoveredResources(reader client.Reader, newList func() client.ObjectList, image func(client.Object) string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		policy, ok := o.(*v1alpha1.TrustPolicy)
		if !ok {
			return nil
		}
		list := newList()
		if err := reader.List(ctx, list); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "list resources for a TrustPolicy change", "trustPolicy", policy.Name)
			return nil
		}
		items, err := apimeta.ExtractList(list)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "read list", "trustPolicy", policy.Name)
			return nil
		}
		var reqs []reconcile.Request
		for _, item := range items {
			obj, ok := item.(client.Object)
			if !ok {
				continue
			}
			// An image that does not parse is refused before verification anyway.
			if ref, err := source.ParseReference(image(obj)); err == nil && policyCovers(policy, ref) {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
			}
		}
		return reqs
	}
}

// TrustSecretsCache makes the cache that wakes TrustPolicies' resources when a policy's Secret
// changes: the metadata (name, resourceVersion) of the Secrets of the controller's namespace,
// where every policy's Secret is. No Secret's data is held: the verifier reads the keys
// uncached, when it verifies. Nil without a namespace (no policy's Secret can then be read).
func TrustSecretsCache(mgr ctrl.Manager, namespace string) (cache.Cache, error) {
	if namespace == "" {
		return nil, nil
	}
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultNamespaces: map[string]cache.Config{namespace: {}},
		DefaultTransform:  cache.TransformStripManagedFields(),
	})
	if err != nil {
		return nil, fmt.Errorf("create the cache of TrustPolicy Secrets: %w", err)
	}
	if err := mgr.Add(reconciler.ManagedCache{Cache: c}); err != nil {
		return nil, fmt.Errorf("start the cache of TrustPolicy Secrets: %w", err)
	}
	return c, nil
}

// WatchTrustSecrets wakes the resources of one kind that a TrustPolicy covers when the policy's
// Secret (in namespace) is created, changed or deleted, so a key rotation counts at once, not
// at each resource's next interval.
func WatchTrustSecrets(b *builder.Builder, secrets cache.Cache, namespace string, reader client.Reader,
	newList func() client.ObjectList, image func(client.Object) string) *builder.Builder {
	secret := &metav1.PartialObjectMetadata{}
	secret.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	covered := CoveredResources(reader, newList, image)
	return b.WatchesRawSource(crsource.Kind(secrets, secret, handler.TypedEnqueueRequestsFromMapFunc(
		func(ctx context.Context, o *metav1.PartialObjectMetadata) []reconcile.Request {
			if o.GetNamespace() != namespace {
				return nil
			}
			var policies v1alpha1.TrustPolicyList
			if err := reader.List(ctx, &policies); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "list TrustPolicies for a Secret change", "secret", o.GetName())
				return nil
			}
			seen := map[reconcile.Request]bool{}
			var reqs []reconcile.Request
			for i := range policies.Items {
				if policies.Items[i].Spec.Verify.SecretRef.Name != o.GetName() {
					continue
				}
				for _, r := range covered(ctx, &policies.Items[i]) {
					if !seen[r] {
						seen[r] = true
						reqs = append(reqs, r)
					}
				}
			}
			return reqs
		}), predicate.TypedResourceVersionChangedPredicate[*metav1.PartialObjectMetadata]{}))
}
