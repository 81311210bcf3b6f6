package apply

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What Progress keeps of a settled pass is digests (settledEntry): each object is found again
// by its key, with its hash and resourceVersion; another key, even one differing in a single
// part, is not found, and a hash that is not one reads as none.
func TestSettledMemoryFindsEachObjectByItsKey(t *testing.T) {
	objects := map[key]settledObject{}
	for i := range 50 {
		k := key{class: "hosted-cluster", kind: "ConfigMap", namespace: "ns", name: fmt.Sprintf("cm-%d", i)}
		objects[k] = settledObject{hash: fmt.Sprintf("%032x", i+1), resourceVersion: fmt.Sprint(100 + i)}
	}
	odd := key{group: "apps", kind: "Deployment", namespace: "ns", name: "odd"}
	objects[odd] = settledObject{hash: "not a hash", resourceVersion: "7"}
	p := NewProgress(0)
	p.settle(objects)
	require.Equal(t, len(objects), p.Settled())
	for k, want := range objects {
		got, ok := p.settledAs(k)
		require.True(t, ok, "%v", k)
		if k == odd {
			want.hash = ""
		}
		assert.Equal(t, want, got, "%v", k)
	}
	for _, k := range []key{
		{class: "", kind: "ConfigMap", namespace: "ns", name: "cm-1"},
		{class: "hosted-cluster", kind: "ConfigMap", namespace: "ns2", name: "cm-1"},
		{class: "hosted-cluster", kind: "Secret", namespace: "ns", name: "cm-1"},
		{class: "hosted-cluster", kind: "ConfigMap", namespace: "n", name: "scm-1"},
	} {
		_, ok := p.settledAs(k)
		assert.False(t, ok, "%v is not settled", k)
	}
}
