package e2e

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/test/testenv"
)

// TestSmoke proves the test environment itself: two control planes that accept server-side
// apply, and a registry that stores and serves content by digest. The e2e suite runs its own
// registry whatever $PKGSYNC_TEST_REGISTRY says; TestUserRegistry reaches that one.
func TestSmoke(t *testing.T) {
	t.Parallel()
	management := testenv.NewControlPlane(t, "management")
	hosted := testenv.NewControlPlane(t, "hosted")
	registry := testenv.NewRegistry(t, testenv.RegistryOptions{Own: true})

	for _, cp := range []*testenv.ControlPlane{management, hosted} {
		t.Run("apply to "+cp.Name, func(t *testing.T) {
			c, err := client.New(cp.Config, client.Options{})
			require.NoError(t, err)
			cm := &corev1.ConfigMap{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
				ObjectMeta: metav1.ObjectMeta{Name: "smoke", Namespace: "default"},
				Data:       map[string]string{"cluster": cp.Name},
			}
			//nolint:staticcheck // client.Apply with a typed object is the simplest SSA call here.
			require.NoError(t, c.Patch(t.Context(), cm, client.Apply, client.FieldOwner("pkgsync-smoke")))

			var got corev1.ConfigMap
			require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(cm), &got))
			assert.Equal(t, cp.Name, got.Data["cluster"])
			require.NotEmpty(t, got.ManagedFields)
			assert.Equal(t, "pkgsync-smoke", got.ManagedFields[0].Manager)
		})
	}

	t.Run("registry round trip by digest", func(t *testing.T) {
		repo, err := remote.NewRepository(registry.Host + "/smoke/artifact")
		require.NoError(t, err)
		repo.PlainHTTP = true
		payload := []byte("pkgsync smoke test payload")
		desc, err := oras.PushBytes(t.Context(), repo, "application/vnd.pkgsync.smoke", payload)
		require.NoError(t, err)

		rc, err := repo.Fetch(t.Context(), desc)
		require.NoError(t, err)
		defer rc.Close()
		got, err := content.ReadAll(rc, desc)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(payload, got))
	})
}
