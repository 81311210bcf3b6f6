package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"pkgsync.dev/pkgsync/api/v1alpha1"
)

func TestMergedConfig(t *testing.T) {
	t.Parallel()
	got, err := mergedConfig(jsonOf(`{"a":{"x":1,"y":2},"b":"keep"}`), []v1alpha1.ConfigOverride{
		{HostedClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}, Config: jsonOf(`{"a":{"y":3}}`)},
		{HostedClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{"tier": "silver"}}, Config: jsonOf(`{"b":"no"}`)},
	}, map[string]string{"tier": "gold"})
	assert.NoError(t, err)
	assert.JSONEq(t, `{"a":{"x":1,"y":3},"b":"keep"}`, string(got.Raw))
}

func jsonOf(s string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(s)} }
