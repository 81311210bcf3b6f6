package hosted

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"pkgsync.dev/pkgsync/test/testenv"
)

// pathCounter counts the requests a client sends, by path.
type pathCounter struct {
	mu    sync.Mutex
	paths map[string]int
}

func (c *pathCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		c.mu.Lock()
		c.paths[r.URL.Path]++
		c.mu.Unlock()
		return rt.RoundTrip(r)
	})
}

func (c *pathCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.paths
	c.paths = map[string]int{}
	return out
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestRESTMapperSharesBuiltinGroups: a hosted cluster's mapper asks the hosted API server
// nothing for the kinds of the built-in groups (the shared mapper answers), and discovers any
// other group one group version at a time, once, with one request: never the whole discovery
// document, which made a mapper per hosted cluster cost ~270 KB.
func TestRESTMapperSharesBuiltinGroups(t *testing.T) {
	t.Parallel()
	cp := testenv.NewControlPlane(t, "mapper")

	sharedHTTP, err := rest.HTTPClientFor(cp.Config)
	require.NoError(t, err)
	shared, err := apiutil.NewDynamicRESTMapper(cp.Config, sharedHTTP)
	require.NoError(t, err)

	counter := &pathCounter{paths: map[string]int{}}
	cfg := rest.CopyConfig(cp.Config)
	cfg.Wrap(counter.wrap)
	hc, err := rest.HTTPClientFor(cfg)
	require.NoError(t, err)
	m, err := newRESTMapper(shared, cfg, hc)
	require.NoError(t, err)

	for _, tc := range []struct {
		gvk        schema.GroupVersionKind
		resource   string
		namespaced bool
	}{
		{schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, "configmaps", true},
		{schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, "namespaces", false},
		{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, "deployments", true},
		{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, "clusterroles", false},
	} {
		mapping, err := m.RESTMapping(tc.gvk.GroupKind(), tc.gvk.Version)
		require.NoError(t, err, tc.gvk)
		assert.Equal(t, tc.resource, mapping.Resource.Resource, tc.gvk)
		assert.Equal(t, tc.namespaced, mapping.Scope.Name() == meta.RESTScopeNameNamespace, tc.gvk)
	}
	assert.Empty(t, counter.take(), "built-in kinds are mapped without asking the hosted cluster")

	// A CRD of the hosted cluster: discovered from it, with one request for its group version.
	scheme := runtime.NewScheme()
	require.NoError(t, apiextensionsv1.AddToScheme(scheme))
	admin, err := client.New(cp.Config, client.Options{Scheme: scheme})
	require.NoError(t, err)
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.mapper.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "mapper.example.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Scope: apiextensionsv1.ClusterScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}},
			}},
		},
	}
	widget := schema.GroupKind{Group: "mapper.example.com", Kind: "Widget"}

	_, err = m.RESTMapping(widget, "v1")
	require.True(t, meta.IsNoMatchError(err), "before the CRD: no match, got %v", err)
	assert.Equal(t, map[string]int{"/apis/mapper.example.com/v1": 1}, counter.take())

	require.NoError(t, admin.Create(t.Context(), crd))
	t.Cleanup(func() { _ = admin.Delete(t.Context(), crd) })
	// Until Reset, the group version stays unknown: apply resets the mapper on a miss.
	_, err = m.RESTMapping(widget, "v1")
	require.True(t, meta.IsNoMatchError(err))
	assert.Empty(t, counter.take(), "a miss is remembered until Reset")

	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		m.Reset()
		mapping, err := m.RESTMapping(widget, "v1")
		if assert.NoError(c, err) {
			assert.Equal(c, "widgets", mapping.Resource.Resource)
			assert.Equal(c, meta.RESTScopeNameRoot, mapping.Scope.Name())
		}
	}, 30*time.Second, 100*time.Millisecond)
	counter.take()

	mapping, err := m.RESTMapping(widget) // the preferred version: one request for the group
	require.NoError(t, err)
	assert.Equal(t, "v1", mapping.Resource.Version)
	assert.Equal(t, map[string]int{"/apis/mapper.example.com": 1}, counter.take())

	_, err = m.RESTMapping(widget, "v1")
	require.NoError(t, err)
	assert.Empty(t, counter.take(), "a discovered group version is not asked for again")

	_, err = m.RESTMapping(schema.GroupKind{Group: "mapper.example.com", Kind: "Gadget"}, "v1")
	assert.True(t, meta.IsNoMatchError(err), "an unknown kind of a known group: no match, got %v", err)
	assert.Empty(t, counter.take())
}
