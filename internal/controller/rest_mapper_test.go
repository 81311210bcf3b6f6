package controller

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// countingMapper is a DefaultRESTMapper that counts the RESTMapping questions it answers and
// the resets it gets.
type countingMapper struct {
	*meta.DefaultRESTMapper
	asked, resets int
}

func (c *countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	c.asked++
	return c.DefaultRESTMapper.RESTMapping(gk, versions...)
}

func (c *countingMapper) Reset() { c.resets++ }

func newCountingMapper(kinds ...schema.GroupVersionKind) *countingMapper {
	var versions []schema.GroupVersion
	for _, gvk := range kinds {
		versions = append(versions, gvk.GroupVersion())
	}
	m := meta.NewDefaultRESTMapper(versions)
	for _, gvk := range kinds {
		m.Add(gvk, meta.RESTScopeNamespace)
	}
	return &countingMapper{DefaultRESTMapper: m}
}

func TestMemoMapperAsksTheDelegateOncePerKindAndTTL(t *testing.T) {
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	delegate := newCountingMapper(cm)
	now := time.Unix(1000, 0)
	m := newMemoMapper(delegate, func() time.Time { return now })

	first, err := m.RESTMapping(cm.GroupKind(), "v1")
	require.NoError(t, err)
	assert.Equal(t, "configmaps", first.Resource.Resource)
	assert.Equal(t, meta.RESTScopeNameNamespace, first.Scope.Name())
	first.Resource.Resource = "changed by a caller"
	for range 10 {
		again, err := m.RESTMapping(cm.GroupKind(), "v1")
		require.NoError(t, err)
		assert.Equal(t, "configmaps", again.Resource.Resource, "each caller gets a copy")
	}
	assert.Equal(t, 1, delegate.asked, "answered from memory")

	_, err = m.RESTMapping(cm.GroupKind())
	require.NoError(t, err)
	assert.Equal(t, 2, delegate.asked, "no version is another question")

	now = now.Add(memoTTL)
	_, err = m.RESTMapping(cm.GroupKind(), "v1")
	require.NoError(t, err)
	assert.Equal(t, 3, delegate.asked, "asked again after the TTL")

	m.Reset()
	assert.Equal(t, 1, delegate.resets, "the delegate is reset too")
	_, err = m.RESTMapping(cm.GroupKind(), "v1")
	require.NoError(t, err)
	assert.Equal(t, 4, delegate.asked, "asked again after a reset")
}

func TestMemoMapperDoesNotKeepMisses(t *testing.T) {
	delegate := newCountingMapper()
	m := newMemoMapper(delegate, time.Now)
	widget := schema.GroupKind{Group: "example.com", Kind: "Widget"}
	for range 3 {
		_, err := m.RESTMapping(widget, "v1")
		assert.True(t, meta.IsNoMatchError(err), "the delegate's error: %v", err)
	}
	assert.Equal(t, 3, delegate.asked, "a kind not served yet is looked up every time")

	delegate.Add(widget.WithVersion("v1"), meta.RESTScopeRoot) // its CRD is installed
	mapping, err := m.RESTMapping(widget, "v1")
	require.NoError(t, err)
	assert.Equal(t, meta.RESTScopeNameRoot, mapping.Scope.Name())
}

func TestMemoMapperIsBounded(t *testing.T) {
	var kinds []schema.GroupVersionKind
	for i := range maxMemoEntries + 10 {
		kinds = append(kinds, schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: fmt.Sprintf("Kind%d", i)})
	}
	m := newMemoMapper(newCountingMapper(kinds...), time.Now)
	for _, gvk := range kinds {
		_, err := m.RESTMapping(gvk.GroupKind(), gvk.Version)
		require.NoError(t, err)
	}
	assert.Len(t, m.entries, maxMemoEntries)
}
