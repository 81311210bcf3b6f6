package fleet

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

// TestWithShardLabels: members carry the fleet's values of the shard keys, over the template's,
// and not a key the fleet lacks.
func TestWithShardLabels(t *testing.T) {
	t.Parallel()
	fleet := &v1alpha1.HostedClusterPackage{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"shard": "a", "other": "x"}}}
	member := &v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"shard": "template", "tier": "t", "missing": "template"}}}
	withShardLabels(member, fleet, []string{"shard", "missing"})
	assert.Equal(t, map[string]string{"shard": "a", "tier": "t"}, member.Labels)
}
