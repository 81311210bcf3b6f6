package e2e

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// configFromPackage renders its configuration into a ConfigMap; password must be lower case,
// so that a value that is not fails the schema with a message that would quote it.
var configFromPackage = map[string]string{
	"manifest.yaml": `apiVersion: pkgsync.dev/v1alpha1
kind: PackageManifest
metadata:
  name: configured
spec:
  phases:
  - name: config
  config:
    openAPIV3Schema:
      type: object
      properties:
        greeting: {type: string}
        level: {type: string}
        password: {type: string, pattern: "^[a-z0-9-]+$"}
`,
	"config.yaml.gotmpl": `apiVersion: v1
kind: ConfigMap
metadata:
  name: rendered
  annotations:
    pkgsync.dev/phase: config
data:
  greeting: {{ .config.greeting | quote }}
  level: {{ .config.level | quote }}
  password: {{ .config.password | quote }}
`,
}

// TestConfigFrom: spec.configFrom merges a ConfigMap's object and a Secret's value under
// spec.config (whose values win); a change of either reconciles at once (the interval is 1h);
// a Secret's value that fails the schema is reported without the value, which appears nowhere
// in the Package's status or in any event; a missing ConfigMap holds the Package until it is
// created.
func TestConfigFrom(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	image := suite.registry.Host + "/e2e/" + ns + "/configured:v1"
	pushPackage(t, writePackage(t, configFromPackage), "e2e/"+ns+"/configured:v1")

	base := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "base"},
		Data: map[string]string{"config.yaml": "greeting: hello\nlevel: info\n"}}
	require.NoError(t, suite.mgmtClient.Create(t.Context(), base))
	creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"},
		Data: map[string][]byte{"password": []byte("first-secret-value")}}
	require.NoError(t, suite.mgmtClient.Create(t.Context(), creds))

	pkg := newPackage(ns, "configured", image, `{"level":"debug"}`)
	pkg.Spec.ConfigFrom = []v1alpha1.ConfigSource{
		{Kind: "ConfigMap", Name: "base"},
		{Kind: "Secret", Name: "creds", Key: "password", TargetPath: "password"},
		{Kind: "ConfigMap", Name: "not-there", Optional: true},
	}
	createPackage(t, pkg)
	waitForReady(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	assert.Equal(t, map[string]string{"greeting": "hello", "level": "debug", "password": "first-secret-value"}, configMapData(t, ns, "rendered"),
		"spec.config wins over the ConfigMap")
	assertNowhere(t, pkg, "first-secret-value")

	// A change of the ConfigMap reconciles the Package.
	base.Data["config.yaml"] = "greeting: bonjour\nlevel: info\n"
	require.NoError(t, suite.mgmtClient.Update(t.Context(), base))
	eventually(t, func(a *attempt) {
		assert.Equal(a, "bonjour", configMapData(a, ns, "rendered")["greeting"])
	}, "the ConfigMap's change applied")

	// So does the Secret's.
	creds.Data["password"] = []byte("second-secret-value")
	require.NoError(t, suite.mgmtClient.Update(t.Context(), creds))
	eventually(t, func(a *attempt) {
		assert.Equal(a, "second-secret-value", configMapData(a, ns, "rendered")["password"])
	}, "the Secret's change applied")

	// A value the schema refuses: the schema's message quotes it; status and events do not.
	const leaked = "Leak-Canary-Value-7Q"
	creds.Data["password"] = []byte(leaked)
	require.NoError(t, suite.mgmtClient.Update(t.Context(), creds))
	cond := waitForReady(t, pkg, metav1.ConditionFalse, v1alpha1.InvalidConfigReason)
	assert.Contains(t, cond.Message, "[redacted]")
	assertNowhere(t, pkg, leaked)
	assertNowhere(t, pkg, "second-secret-value")
	assert.Equal(t, "second-secret-value", configMapData(t, ns, "rendered")["password"], "nothing applied")
}

// TestConfigFromMissing: a ConfigMap that is not optional and missing holds the Package
// (ConfigSourceNotFound, naming it, nothing applied) until it is created, which reconciles it.
func TestConfigFromMissing(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	image := suite.registry.Host + "/e2e/" + ns + "/configured:v1"
	pushPackage(t, writePackage(t, configFromPackage), "e2e/"+ns+"/configured:v1")
	pkg := newPackage(ns, "configured", image, `{"password":"explicit","level":"warn"}`)
	pkg.Spec.RetryInterval = &metav1.Duration{Duration: 3600e9}
	pkg.Spec.ConfigFrom = []v1alpha1.ConfigSource{{Kind: "ConfigMap", Name: "later", Key: "values"}}
	createPackage(t, pkg)
	waitForReadyMessage(t, pkg, metav1.ConditionFalse, v1alpha1.ConfigSourceNotFoundReason, "ConfigMap "+ns+"/later not found")
	assert.False(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", ns, "rendered"))

	require.NoError(t, suite.mgmtClient.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "later"},
		Data: map[string]string{"values": `{"greeting": "late", "password": "overridden"}`}}))
	waitForReady(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	data := configMapData(t, ns, "rendered")
	assert.Equal(t, "late", data["greeting"])
	assert.Equal(t, "explicit", data["password"], "spec.config wins")
}

// assertNowhere fails when value appears in the Package's status or in any event of the cluster.
func assertNowhere(t *testing.T, pkg *v1alpha1.Package, value string) {
	t.Helper()
	require.NoError(t, suite.mgmtClient.Get(t.Context(), client.ObjectKeyFromObject(pkg), pkg))
	status, err := json.Marshal(pkg.Status)
	require.NoError(t, err)
	assert.NotContains(t, string(status), value, "status")
	var events corev1.EventList
	require.NoError(t, suite.mgmtClient.List(t.Context(), &events))
	for _, e := range events.Items {
		ev, err := json.Marshal(e)
		require.NoError(t, err)
		assert.NotContains(t, string(ev), value, "event %s/%s", e.Namespace, e.Name)
	}
}
