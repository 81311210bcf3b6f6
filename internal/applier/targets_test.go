package applier

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
)

// TestImpersonatedClientsBounded is issue 41 (8b): spec.serviceAccountName is the tenant's to
// write, and each name they write made the controller build and keep one more client. Past
// maxImpersonatedClients names, the clients kept stay bounded, and the one used last is kept.
func TestImpersonatedClientsBounded(t *testing.T) {
	t.Parallel()
	// No request is made: a client with a mapper given is built without asking the server.
	tg := newTargets(&rest.Config{Host: "https://127.0.0.1:1"}, runtime.NewScheme(), meta.NewDefaultRESTMapper(nil), nil)
	first, err := tg.managementTarget("tenant", "sa-0")
	require.NoError(t, err)
	for i := 1; i < maxImpersonatedClients+100; i++ {
		_, err := tg.managementTarget("tenant", fmt.Sprintf("sa-%d", i))
		require.NoError(t, err)
		if i%100 == 0 {
			// sa-0 is in use all along: it stays, whoever else is evicted.
			again, err := tg.managementTarget("tenant", "sa-0")
			require.NoError(t, err)
			assert.Same(t, first.Client, again.Client, "the client in use is kept (after %d names)", i)
		}
	}
	assert.LessOrEqual(t, impersonatedClients(tg), maxImpersonatedClients)
	again, err := tg.managementTarget("tenant", "sa-0")
	require.NoError(t, err)
	assert.Same(t, first.Client, again.Client)
	assert.Equal(t, "management cluster as system:serviceaccount:tenant:sa-0", again.Name)
}

func impersonatedClients(tg *Targets) int {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return tg.impersonated.Len()
}
