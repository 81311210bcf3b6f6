package applier

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/internal/reconciler"
	"pkgsync.dev/pkgsync/render"
)

func TestMergeConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		dst, src map[string]any
		want     map[string]any
	}{
		{"maps merge key by key", map[string]any{"a": map[string]any{"x": 1, "y": 2}}, map[string]any{"a": map[string]any{"y": 3, "z": 4}},
			map[string]any{"a": map[string]any{"x": 1, "y": 3, "z": 4}}},
		{"lists are replaced", map[string]any{"l": []any{1, 2}}, map[string]any{"l": []any{3}}, map[string]any{"l": []any{3}}},
		{"a scalar replaces a map", map[string]any{"a": map[string]any{"x": 1}}, map[string]any{"a": "s"}, map[string]any{"a": "s"}},
		{"a map replaces a scalar", map[string]any{"a": "s"}, map[string]any{"a": map[string]any{"x": 1}}, map[string]any{"a": map[string]any{"x": 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			mergeConfig(tt.dst, tt.src)
			assert.Equal(t, tt.want, tt.dst)
		})
	}
}

func TestSetPath(t *testing.T) {
	t.Parallel()
	m := map[string]any{"db": "not a map", "keep": 1}
	setPath(m, []string{"db", "password"}, "s3cret")
	setPath(m, []string{"top"}, "v")
	assert.Equal(t, map[string]any{"db": map[string]any{"password": "s3cret"}, "keep": 1, "top": "v"}, m)
}

func configFromClient(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
}

func TestReadConfig(t *testing.T) {
	t.Parallel()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "base"},
		Data: map[string]string{"config.yaml": "replicas: 2\nlog:\n  level: info\n  format: json\nname: from-cm\n", "other": "x"}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "creds"},
		Data: map[string][]byte{"password": []byte("hunter2"), "config.yaml": []byte("token: tok-3141\n")}}
	c := configFromClient(t, cm, secret)
	spec := &v1alpha1.PackageSpec{
		Config: &apiextensionsv1.JSON{Raw: []byte(`{"name":"explicit","log":{"level":"debug"}}`)},
		ConfigFrom: []v1alpha1.ConfigSource{
			{Kind: "ConfigMap", Name: "base"},
			{Kind: "Secret", Name: "creds", Key: "password", TargetPath: "db.password"},
			{Kind: "Secret", Name: "creds"},
			{Kind: "ConfigMap", Name: "absent", Optional: true},
			{Kind: "Secret", Name: "creds", Key: "absent", Optional: true},
		},
	}
	in, err := ReadConfig(t.Context(), c, "ns", spec)
	require.NoError(t, err)
	assert.JSONEq(t, `{"replicas":2,"name":"explicit","log":{"level":"debug","format":"json"},"db":{"password":"hunter2"},"token":"tok-3141"}`, string(in.Raw))

	// Neither fingerprint holds a plain digest of what the Secret gave, and status's does not
	// change when only the value (not the object) is what differs.
	for _, v := range []string{"hunter2", "tok-3141"} {
		assert.NotContains(t, in.Digest, v)
	}
	assert.True(t, strings.HasPrefix(in.RenderKey, "hmac-sha256:"), in.RenderKey)
	assert.Contains(t, in.secretValues, "hunter2")
	assert.Contains(t, in.secretValues, "tok-3141")

	// The same configuration without configFrom keeps the digest it always had.
	plain := &v1alpha1.PackageSpec{Config: spec.Config}
	pin, err := ReadConfig(t.Context(), c, "ns", plain)
	require.NoError(t, err)
	assert.Equal(t, configDigestOf(plain), pin.Digest)
	assert.Equal(t, string(spec.Config.Raw), string(pin.Raw))
}

func TestReadConfigDigestFollowsConfigMapValues(t *testing.T) {
	t.Parallel()
	spec := &v1alpha1.PackageSpec{ConfigFrom: []v1alpha1.ConfigSource{{Kind: "ConfigMap", Name: "base"}}}
	digest := func(value string) string {
		c := configFromClient(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "base"}, Data: map[string]string{"config.yaml": value}})
		in, err := ReadConfig(t.Context(), c, "ns", spec)
		require.NoError(t, err)
		assert.True(t, strings.HasPrefix(in.RenderKey, "sha256:"))
		return in.Digest
	}
	assert.NotEqual(t, digest("a: 1"), digest("a: 2"))
	assert.Equal(t, digest("a: 1"), digest("a: 1"))
}

func TestReadConfigErrors(t *testing.T) {
	t.Parallel()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "creds"},
		Data: map[string][]byte{"config.yaml": []byte("[hunter2, not an object")}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "list"}, Data: map[string]string{"config.yaml": "- a\n"}}
	c := configFromClient(t, secret, cm)
	tests := []struct {
		name   string
		source v1alpha1.ConfigSource
		reason string
		text   string
	}{
		{"missing object", v1alpha1.ConfigSource{Kind: "ConfigMap", Name: "gone"}, v1alpha1.ConfigSourceNotFoundReason, "ConfigMap ns/gone not found"},
		{"missing key", v1alpha1.ConfigSource{Kind: "Secret", Name: "creds", Key: "nope"}, v1alpha1.ConfigSourceNotFoundReason, `Secret ns/creds has no key "nope"`},
		{"not an object", v1alpha1.ConfigSource{Kind: "ConfigMap", Name: "list"}, v1alpha1.InvalidConfigSourceReason, "does not hold an object"},
		{"a Secret's parse error shows nothing of it", v1alpha1.ConfigSource{Kind: "Secret", Name: "creds"}, v1alpha1.InvalidConfigSourceReason, "does not hold a YAML or JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ReadConfig(t.Context(), c, "ns", &v1alpha1.PackageSpec{ConfigFrom: []v1alpha1.ConfigSource{tt.source}})
			require.Error(t, err)
			assert.Equal(t, tt.reason, reconciler.ReasonFor(err))
			assert.Contains(t, err.Error(), tt.text)
			assert.NotContains(t, err.Error(), "hunter2")
		})
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	in := &ConfigInput{secretValues: redactionForms([]string{"hun\"ter2", "5"})}
	cfgErr := render.Errors{&render.ConfigError{Field: "config.password", Detail: `Invalid value: "hun\"ter2": must be at most 3 characters`}}
	err := in.Redact(errors.Join(errors.New("render x"), cfgErr))
	assert.NotContains(t, err.Error(), "hun")
	assert.Contains(t, err.Error(), "[redacted]")
	// The reason stays that of the error redacted.
	assert.Equal(t, v1alpha1.InvalidConfigReason, reconciler.ReasonFor(err))
	// Without Secret values the error is left as it is.
	plain := errors.New("x")
	assert.Same(t, plain, (&ConfigInput{}).Redact(plain))
}

// TestRedactResult: what a pass says of its objects (why each is not available, the conditions
// mapped from them) reaches status without the values of Secrets the configuration read.
func TestRedactResult(t *testing.T) {
	t.Parallel()
	in := &ConfigInput{secretValues: redactionForms([]string{"hunter2"})}
	res := &apply.Result{
		Phases: []apply.PhaseResult{{Name: "deploy", NotAvailable: []apply.ObjectStatus{{
			Reason: `kstatus Failed: ReplicaSet failed (ReplicaFailure=True FailedCreate: pods "app-x" is forbidden: env PASSWORD=hunter2 refused)`}}}},
		Conditions: []metav1.Condition{{Type: "Ready", Message: "token hunter2 rejected"}},
	}
	in.RedactResult(res)
	assert.NotContains(t, res.Phases[0].NotAvailable[0].Reason, "hunter2")
	assert.Contains(t, res.Phases[0].NotAvailable[0].Reason, "[redacted]")
	assert.Equal(t, "token [redacted] rejected", res.Conditions[0].Message)
	(&ConfigInput{}).RedactResult(res) // nothing to redact
	(&ConfigInput{}).RedactResult(nil)
}

// TestRenderKeyOfSecretConfigIsPerNamespace: a render made from Secret values is found in the
// render cache only by resources of the same namespace, so another namespace holding the same
// image cannot confirm a guess of those values by how fast its own render comes back.
func TestRenderKeyOfSecretConfigIsPerNamespace(t *testing.T) {
	t.Parallel()
	spec := &v1alpha1.PackageSpec{ConfigFrom: []v1alpha1.ConfigSource{{Kind: "Secret", Name: "creds", Key: "password", TargetPath: "password"}}}
	secretIn := func(ns string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"}, Data: map[string][]byte{"password": []byte("hunter2")}}
	}
	c := configFromClient(t, secretIn("a"), secretIn("b"))
	a, err := ReadConfig(t.Context(), c, "a", spec)
	require.NoError(t, err)
	b, err := ReadConfig(t.Context(), c, "b", spec)
	require.NoError(t, err)
	assert.Equal(t, string(a.Raw), string(b.Raw))
	assert.NotEqual(t, a.RenderKey, b.RenderKey, "a render from one namespace's Secret must not be keyed for another's")
	again, err := ReadConfig(t.Context(), c, "a", spec)
	require.NoError(t, err)
	assert.Equal(t, a.RenderKey, again.RenderKey, "within a namespace the render is shared")

	// Without a Secret the key is the configuration's plain digest, shared across namespaces.
	plain := &v1alpha1.PackageSpec{Config: &apiextensionsv1.JSON{Raw: []byte(`{"x":1}`)}}
	pa, err := ReadConfig(t.Context(), c, "a", plain)
	require.NoError(t, err)
	pb, err := ReadConfig(t.Context(), c, "b", plain)
	require.NoError(t, err)
	assert.Equal(t, pa.RenderKey, pb.RenderKey)
}
