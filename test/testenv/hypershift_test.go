package testenv

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// TestHyperShiftCRDsRefuseWhatHyperShiftRefuses: the test CRDs accept the objects the builders
// make, as HyperShift's CLI and operators write them, and refuse what HyperShift's own CRDs
// refuse in the fields pkgsync reads and the fields HyperShift requires; so no test passes with a
// HostedCluster HyperShift would never store.
func TestHyperShiftCRDsRefuseWhatHyperShiftRefuses(t *testing.T) {
	t.Parallel()
	cp := NewControlPlane(t, "hypershift")
	crds, err := HyperShiftCRDs()
	require.NoError(t, err)
	_, err = envtest.InstallCRDs(cp.Config, envtest.CRDInstallOptions{CRDs: crds})
	require.NoError(t, err)
	c, err := client.New(cp.Config, client.Options{})
	require.NoError(t, err)
	ctx := t.Context()
	for _, ns := range []string{"clusters", "clusters-ok"} {
		require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}

	hc := HostedCluster("clusters", "ok")
	hc.SetLabels(map[string]string{"wave": "canary"})
	require.NoError(t, unstructured.SetNestedStringMap(hc.Object, map[string]string{"role": "infra"}, "spec", "nodeSelector"))
	require.NoError(t, unstructured.SetNestedField(hc.Object, "2026-01-02T15:04:05Z", "spec", "pausedUntil"))
	require.NoError(t, c.Create(ctx, hc), "a HostedCluster as HyperShift's CLI writes it")
	require.NoError(t, unstructured.SetNestedField(hc.Object, map[string]any{
		"conditions": []any{
			Condition("Available", true, "The hosted control plane is available", hc.GetGeneration()),
			Condition("ReconciliationActive", false, "Reconciliation paused until: 2026-01-02T15:04:05Z", hc.GetGeneration()),
		},
		"controlPlaneEndpoint": map[string]any{"host": "192.168.1.100", "port": int64(31443)},
	}, "status"))
	require.NoError(t, c.Status().Update(ctx, hc), "its status as HyperShift's operator writes it")
	require.NoError(t, c.Create(ctx, HostedControlPlane(hc, "clusters-ok")), "its HostedControlPlane")
	require.NoError(t, c.Create(ctx, ConnectorSecret("clusters-ok", []byte("apiVersion: v1\nkind: Config\n"))), "its connector Secret")

	refusedSpecs := map[string]func(spec map[string]any){
		"no release":                      func(s map[string]any) { delete(s, "release") },
		"an empty release image":          func(s map[string]any) { s["release"] = map[string]any{"image": ""} },
		"no platform":                     func(s map[string]any) { delete(s, "platform") },
		"platform type none, lower-case":  func(s map[string]any) { s["platform"] = map[string]any{"type": "none"} },
		"platform type Baremetal":         func(s map[string]any) { s["platform"] = map[string]any{"type": "Baremetal"} },
		"no pull secret":                  func(s map[string]any) { delete(s, "pullSecret") },
		"no services":                     func(s map[string]any) { delete(s, "services") },
		"three services":                  func(s map[string]any) { s["services"] = s["services"].([]any)[:3] },
		"service apiserver, lower-case":   func(s map[string]any) { s["services"].([]any)[0].(map[string]any)["service"] = "apiserver" },
		"etcd without managementType":     func(s map[string]any) { s["etcd"] = map[string]any{"managed": map[string]any{}} },
		"pausedUntil yes":                 func(s map[string]any) { s["pausedUntil"] = "yes" },
		"pausedUntil a date without time": func(s map[string]any) { s["pausedUntil"] = "2026-01-02" },
		"a nodeSelector value not a string": func(s map[string]any) {
			s["nodeSelector"] = map[string]any{"role": int64(1)}
		},
	}
	for name, change := range refusedSpecs {
		t.Run("HostedCluster with "+name, func(t *testing.T) {
			bad := HostedCluster("clusters", "bad")
			change(bad.Object["spec"].(map[string]any))
			err := c.Create(ctx, bad)
			if err == nil {
				_ = c.Delete(ctx, bad)
			}
			assert.True(t, apierrors.IsInvalid(err), "refused as invalid, got %v", err)
		})
	}

	refusedStatuses := map[string]map[string]any{
		"a condition status true, lower-case": {"conditions": []any{withField(Condition("Available", true, "", 1), "status", "true")}},
		"a condition without reason":          {"conditions": []any{withoutField(Condition("Available", true, "", 1), "reason")}},
		"a condition without message":         {"conditions": []any{withoutField(Condition("Available", true, "", 1), "message")}},
		"an endpoint without host":            {"controlPlaneEndpoint": map[string]any{"port": int64(6443)}},
		"an endpoint port as a string":        {"controlPlaneEndpoint": map[string]any{"host": "api.example.com", "port": "6443"}},
	}
	for name, status := range refusedStatuses {
		t.Run("HostedCluster status with "+name, func(t *testing.T) {
			bad := hc.DeepCopy()
			require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(hc), bad))
			bad.Object["status"] = status
			assert.True(t, apierrors.IsInvalid(c.Status().Update(ctx, bad)), "refused as invalid")
		})
	}

	refusedControlPlanes := map[string]func(spec map[string]any){
		"no releaseImage":                func(s map[string]any) { delete(s, "releaseImage") },
		"no infraID":                     func(s map[string]any) { delete(s, "infraID") },
		"no issuerURL":                   func(s map[string]any) { delete(s, "issuerURL") },
		"platform type aws, lower-case":  func(s map[string]any) { s["platform"] = map[string]any{"type": "aws"} },
		"three services":                 func(s map[string]any) { s["services"] = s["services"].([]any)[:3] },
		"no dns":                         func(s map[string]any) { delete(s, "dns") },
		"no sshKey":                      func(s map[string]any) { delete(s, "sshKey") },
		"etcd managementType managed":    func(s map[string]any) { s["etcd"].(map[string]any)["managementType"] = "managed" },
		"a publishing strategy Ingress":  func(s map[string]any) { setStrategy(s, "Ingress") },
		"a publishing strategy nodeport": func(s map[string]any) { setStrategy(s, "nodeport") },
	}
	for name, change := range refusedControlPlanes {
		t.Run("HostedControlPlane with "+name, func(t *testing.T) {
			bad := HostedControlPlane(hc, "clusters-ok")
			bad.SetName("bad")
			change(bad.Object["spec"].(map[string]any))
			err := c.Create(ctx, bad)
			if err == nil {
				_ = c.Delete(ctx, bad)
			}
			assert.True(t, apierrors.IsInvalid(err), "refused as invalid, got %v", err)
		})
	}
}

func withField(m map[string]any, key string, value any) map[string]any {
	m[key] = value
	return m
}

func withoutField(m map[string]any, key string) map[string]any {
	delete(m, key)
	return m
}

// setStrategy sets the publishing strategy type of the first service, without its nodePort.
func setStrategy(spec map[string]any, strategy string) {
	spec["services"].([]any)[0].(map[string]any)["servicePublishingStrategy"] = map[string]any{"type": strategy}
}
