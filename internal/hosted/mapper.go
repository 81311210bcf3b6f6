package hosted

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// builtinGroups are the API groups compiled into kube-apiserver, as client-go knows them: a
// kind of these groups has the same resource name and scope on every cluster that serves it, so
// one mapper can answer for every hosted cluster.
var builtinGroups = func() map[string]bool {
	out := map[string]bool{}
	for _, gv := range clientgoscheme.Scheme.PrioritizedVersionsAllGroups() {
		out[gv.Group] = true
	}
	return out
}()

// restMapper is the RESTMapper of one hosted cluster. Kinds of the built-in groups are mapped by
// a mapper shared by every hosted cluster (the management cluster's): a mapper of its own per
// hosted cluster held ~270 KB of discovery data, most of a 1000-cluster controller's heap. Other
// groups (CRDs, aggregated APIs) are discovered from the hosted cluster itself, one group version
// at a time and only when asked for.
//
// A built-in version that the management cluster does not serve (a newer hosted cluster) is
// looked up in the hosted cluster too; one that the management cluster serves and the hosted
// cluster does not is mapped all the same, and the request to the hosted cluster then fails
// with NotFound, as it would have.
type restMapper struct {
	shared meta.RESTMapper
	own    *groupVersionMapper
}

func newRESTMapper(shared meta.RESTMapper, cfg *rest.Config, httpClient *http.Client) (*restMapper, error) {
	dc, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	return &restMapper{shared: shared, own: &groupVersionMapper{
		discovery: dc, timeout: cfg.Timeout,
		resources: map[schema.GroupVersion][]metav1.APIResource{}, preferred: map[string]string{},
	}}, nil
}

// pick returns the mapper for a group, and the one to fall back to when it has no match.
func (m *restMapper) pick(group string) (first, fallback meta.RESTMapper) {
	if m.shared != nil && builtinGroups[group] {
		return m.shared, m.own
	}
	return m.own, nil
}

func (m *restMapper) KindFor(resource schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	first, fallback := m.pick(resource.Group)
	gvk, err := first.KindFor(resource)
	if fallback != nil && meta.IsNoMatchError(err) {
		return fallback.KindFor(resource)
	}
	return gvk, err
}

func (m *restMapper) KindsFor(resource schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	first, fallback := m.pick(resource.Group)
	gvks, err := first.KindsFor(resource)
	if fallback != nil && meta.IsNoMatchError(err) {
		return fallback.KindsFor(resource)
	}
	return gvks, err
}

func (m *restMapper) ResourceFor(input schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	first, fallback := m.pick(input.Group)
	gvr, err := first.ResourceFor(input)
	if fallback != nil && meta.IsNoMatchError(err) {
		return fallback.ResourceFor(input)
	}
	return gvr, err
}

func (m *restMapper) ResourcesFor(input schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	first, fallback := m.pick(input.Group)
	gvrs, err := first.ResourcesFor(input)
	if fallback != nil && meta.IsNoMatchError(err) {
		return fallback.ResourcesFor(input)
	}
	return gvrs, err
}

func (m *restMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	first, fallback := m.pick(gk.Group)
	mapping, err := first.RESTMapping(gk, versions...)
	if fallback != nil && meta.IsNoMatchError(err) {
		return fallback.RESTMapping(gk, versions...)
	}
	return mapping, err
}

func (m *restMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	first, fallback := m.pick(gk.Group)
	mappings, err := first.RESTMappings(gk, versions...)
	if fallback != nil && meta.IsNoMatchError(err) {
		return fallback.RESTMappings(gk, versions...)
	}
	return mappings, err
}

func (m *restMapper) ResourceSingularizer(resource string) (string, error) {
	if m.shared != nil {
		if s, err := m.shared.ResourceSingularizer(resource); err == nil {
			return s, nil
		}
	}
	return m.own.ResourceSingularizer(resource)
}

// Reset forgets what was discovered from the hosted cluster (a CRD applied since, or removed);
// the shared mapper keeps its own.
func (m *restMapper) Reset() { m.own.Reset() }

// groupVersionMapper discovers the resources of one group version of a cluster when a kind of
// it is first asked for (GET /apis/GROUP/VERSION, and GET /apis/GROUP for the preferred version
// when no version is given), and keeps them until Reset. controller-runtime's lazy mapper is
// not used here: on a server with aggregated discovery it reads and keeps every group's
// resources at the first lookup, which is what made per-cluster mappers expensive.
type groupVersionMapper struct {
	discovery *discovery.DiscoveryClient
	// timeout bounds a preferred-version lookup (the client's own timeout bounds the others).
	timeout time.Duration

	mu        sync.Mutex
	resources map[schema.GroupVersion][]metav1.APIResource
	preferred map[string]string
}

func groupPath(group string) string {
	if group == "" {
		return "/api"
	}
	return "/apis/" + group
}

// groupVersionResources returns the resources of gv, nil when the cluster does not serve it.
func (m *groupVersionMapper) groupVersionResources(gv schema.GroupVersion) ([]metav1.APIResource, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rs, ok := m.resources[gv]; ok {
		return rs, nil
	}
	list, err := m.discovery.ServerResourcesForGroupVersion(gv.String())
	if apierrors.IsNotFound(err) {
		m.resources[gv] = nil
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("discover %s: %w", gv, err)
	}
	rs := make([]metav1.APIResource, 0, len(list.APIResources))
	for _, r := range list.APIResources {
		if !strings.Contains(r.Name, "/") { // subresources are not mapped
			rs = append(rs, metav1.APIResource{Name: r.Name, SingularName: r.SingularName, Namespaced: r.Namespaced, Kind: r.Kind})
		}
	}
	m.resources[gv] = rs
	return rs, nil
}

// preferredVersion returns the version the cluster prefers for group, "" when it does not serve
// the group.
func (m *groupVersionMapper) preferredVersion(group string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if v, ok := m.preferred[group]; ok {
		return v, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(m.timeout, time.Second))
	defer cancel()
	var version string
	if group == "" {
		version = "v1"
	} else {
		var g metav1.APIGroup
		err := m.discovery.RESTClient().Get().AbsPath(groupPath(group)).Do(ctx).Into(&g)
		if err != nil && !apierrors.IsNotFound(err) {
			return "", fmt.Errorf("discover group %s: %w", group, err)
		}
		version = g.PreferredVersion.Version
	}
	m.preferred[group] = version
	return version, nil
}

func (m *groupVersionMapper) versionsOf(group string, versions []string) ([]string, error) {
	if len(versions) > 0 {
		return versions, nil
	}
	v, err := m.preferredVersion(group)
	if err != nil || v == "" {
		return nil, err
	}
	return []string{v}, nil
}

func (m *groupVersionMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	vs, err := m.versionsOf(gk.Group, versions)
	if err != nil {
		return nil, err
	}
	var out []*meta.RESTMapping
	for _, v := range vs {
		gv := schema.GroupVersion{Group: gk.Group, Version: v}
		rs, err := m.groupVersionResources(gv)
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			if r.Kind != gk.Kind {
				continue
			}
			scope := meta.RESTScopeRoot
			if r.Namespaced {
				scope = meta.RESTScopeNamespace
			}
			out = append(out, &meta.RESTMapping{Resource: gv.WithResource(r.Name), GroupVersionKind: gv.WithKind(r.Kind), Scope: scope})
			break
		}
	}
	if len(out) == 0 {
		return nil, &meta.NoKindMatchError{GroupKind: gk, SearchedVersions: vs}
	}
	return out, nil
}

func (m *groupVersionMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	mappings, err := m.RESTMappings(gk, versions...)
	if err != nil {
		return nil, err
	}
	return mappings[0], nil
}

// resourcesFor finds resource (plural or singular name) in its group version.
func (m *groupVersionMapper) resourcesFor(input schema.GroupVersionResource) (schema.GroupVersion, []metav1.APIResource, error) {
	vs, err := m.versionsOf(input.Group, optional(input.Version))
	if err != nil {
		return schema.GroupVersion{}, nil, err
	}
	for _, v := range vs {
		gv := schema.GroupVersion{Group: input.Group, Version: v}
		rs, err := m.groupVersionResources(gv)
		if err != nil {
			return gv, nil, err
		}
		var found []metav1.APIResource
		for _, r := range rs {
			if r.Name == input.Resource || r.SingularName == input.Resource {
				found = append(found, r)
			}
		}
		if len(found) > 0 {
			return gv, found, nil
		}
	}
	return schema.GroupVersion{}, nil, &meta.NoResourceMatchError{PartialResource: input}
}

func optional(version string) []string {
	if version == "" {
		return nil
	}
	return []string{version}
}

func (m *groupVersionMapper) KindsFor(input schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	gv, rs, err := m.resourcesFor(input)
	if err != nil {
		return nil, err
	}
	out := make([]schema.GroupVersionKind, 0, len(rs))
	for _, r := range rs {
		out = append(out, gv.WithKind(r.Kind))
	}
	return out, nil
}

func (m *groupVersionMapper) KindFor(input schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	gvks, err := m.KindsFor(input)
	if err != nil {
		return schema.GroupVersionKind{}, err
	}
	return gvks[0], nil
}

func (m *groupVersionMapper) ResourcesFor(input schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	gv, rs, err := m.resourcesFor(input)
	if err != nil {
		return nil, err
	}
	out := make([]schema.GroupVersionResource, 0, len(rs))
	for _, r := range rs {
		out = append(out, gv.WithResource(r.Name))
	}
	return out, nil
}

func (m *groupVersionMapper) ResourceFor(input schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	gvrs, err := m.ResourcesFor(input)
	if err != nil {
		return schema.GroupVersionResource{}, err
	}
	return gvrs[0], nil
}

// ResourceSingularizer answers from the group versions discovered so far.
func (m *groupVersionMapper) ResourceSingularizer(resource string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, rs := range m.resources {
		for _, r := range rs {
			if r.Name == resource && r.SingularName != "" {
				return r.SingularName, nil
			}
		}
	}
	return "", fmt.Errorf("no singular name of resource %q is known", resource)
}

// Reset forgets every discovered group version.
func (m *groupVersionMapper) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.resources)
	clear(m.preferred)
}
