package probing

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// fixed is a Prober that always gives the same reasons.
type fixed []string

func (f fixed) Probe(context.Context, *unstructured.Unstructured) ([]string, error) { return f, nil }

type broken struct{ err error }

func (b broken) Probe(context.Context, *unstructured.Unstructured) ([]string, error) {
	return []string{"never seen"}, b.err
}

func TestAndAndSelectorCompose(t *testing.T) {
	t.Parallel()
	obj := deploymentWith(2, 0, "False", 2) // apps/v1 Deployment labelled app=web
	configMaps := &v1alpha1.GroupKindSelector{Kind: "ConfigMap"}
	deployments := &v1alpha1.GroupKindSelector{Group: "apps", Kind: "Deployment"}

	t.Run("an object a selector does not select passes", func(t *testing.T) {
		t.Parallel()
		for _, s := range []Selector{
			{Kind: configMaps, Prober: fixed{"x"}},
			{Labels: labels.SelectorFromSet(labels.Set{"app": "db"}), Prober: fixed{"x"}},
			{Kind: deployments, Labels: labels.SelectorFromSet(labels.Set{"app": "db"}), Prober: fixed{"x"}},
		} {
			got, err := s.Probe(t.Context(), obj)
			require.NoError(t, err)
			assert.Empty(t, got)
		}
		got, err := Selector{Kind: deployments, Labels: labels.SelectorFromSet(labels.Set{"app": "web"}), Prober: fixed{"x"}}.Probe(t.Context(), obj)
		require.NoError(t, err)
		assert.Equal(t, []string{"x"}, got)
	})

	t.Run("And collects the reasons of every failing member in order", func(t *testing.T) {
		t.Parallel()
		p := And{
			fixed{"a"},
			Selector{Kind: configMaps, Prober: fixed{"not selected"}},
			fixed(nil),
			Selector{Kind: deployments, Prober: And{Condition{Type: "Available", Status: "True"}, fixed{"b", "c"}}},
			Condition{Type: "Available", Status: "False"},
			fixed{"d"},
		}
		got, err := p.Probe(t.Context(), obj)
		require.NoError(t, err)
		assert.Equal(t, []string{"a", "Available=False, want True", "b", "c", "d"}, got)

		got, err = And{fixed(nil), Selector{Kind: configMaps, Prober: fixed{"x"}}}.Probe(t.Context(), obj)
		require.NoError(t, err)
		assert.Nil(t, got, "none when every member passes")
	})

	t.Run("And ends with the first error", func(t *testing.T) {
		t.Parallel()
		boom := errors.New("boom")
		got, err := And{fixed{"a"}, broken{boom}, fixed{"b"}}.Probe(t.Context(), obj)
		require.ErrorIs(t, err, boom)
		assert.Nil(t, got)
	})
}
