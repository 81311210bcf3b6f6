package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// hostileText is what a package or registry may put in a message to act on the operator's
// terminal rather than be read: set the window title (OSC ... BEL), erase the line and return
// to its start (CSI 2K, CR) to print a forged verdict, an 8-bit CSI and DEL, a next-line
// control, and bidirectional overrides, isolates and marks that make text read in another
// order.
const hostileText = "\x1b]0;pwned\x07\x1b[2K\rnothing to report\u009b2J\u0085\x7f\u202eexe.txt\u202c\u2066\u2069\u200e\u200f\u061c"

// unprintableRunes lists what must never reach the terminal raw, as hostileText holds it.
var unprintableRunes = []string{"\x1b", "\x07", "\r", "\u009b", "\u0085", "\x7f", "\u202e", "\u202c", "\u2066", "\u2069", "\u200e", "\u200f", "\u061c"}

// assertPrintable fails when out holds any of unprintableRunes.
func assertPrintable(t *testing.T, out, what string) {
	t.Helper()
	for _, r := range unprintableRunes {
		assert.NotContains(t, out, r, "%s holds %q raw:\n%q", what, r, out)
	}
}

// hostileRegistry resolves every tag to a manifest, then refuses to serve it with a registry
// error whose message is hostileText (a HEAD response has no body to carry a message).
func hostileRegistry(t *testing.T) string {
	t.Helper()
	body, err := json.Marshal(map[string]any{"errors": []map[string]string{{"code": "DENIED", "message": hostileText}}})
	require.NoError(t, err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead {
			w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
			w.Header().Set("Docker-Content-Digest", "sha256:"+strings.Repeat("ab", 32))
			w.Header().Set("Content-Length", "512")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// writeHostilePackage writes a package whose template fails with hostileText.
func writeHostilePackage(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	quoted, err := json.Marshal(hostileText) // a Go template string constant reads JSON's escapes
	require.NoError(t, err)
	for name, body := range map[string]string{
		"manifest.yaml":         "apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata:\n  name: demo\nspec:\n  phases:\n  - name: deploy\n",
		"deploy/cm.yaml.gotmpl": "{{ fail " + string(quoted) + " }}\n",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	}
	return dir
}

// Text the operator did not write (a template's fail, a registry's error message) reaches the
// terminal through main's error path and the commands' own output escaped, never raw.
func TestHostileTextIsEscaped(t *testing.T) {
	t.Parallel()
	pkg := writeHostilePackage(t)
	registry := hostileRegistry(t)
	keyDir := t.TempDir()
	_, pub := writeKeyPair(t, keyDir, "s3cret")
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	// diff renders before it talks to the cluster: an address nothing listens on will do.
	require.NoError(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600))
	dockerConfig := emptyDockerConfig(t)

	tests := []struct {
		name string
		args []string
	}{
		{"render", []string{"render", pkg}},
		{"validate", []string{"validate", pkg}},
		{"diff", []string{"diff", pkg, "--kubeconfig", kubeconfig, "-n", "team"}},
		{"pull", []string{"pull", registry + "/addon:v1", "--into", filepath.Join(t.TempDir(), "out"), "--registry-config", dockerConfig}},
		{"install", []string{"install", "--export", "--image", registry + "/pkgsync:v1", "--verify-key", pub, "--registry-config", dockerConfig}},
		{"render of a reference", []string{"render", registry + "/addon:v1", "--registry-config", dockerConfig}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			code := run(tt.args, &stdout, &stderr)
			assert.NotZero(t, code)
			out := stdout.String() + stderr.String()
			assertPrintable(t, out, tt.name)
			assert.Contains(t, out, `\u001b]0;pwned\u0007\u001b[2K\u000dnothing to report`,
				"the message is shown, escaped, rather than dropped")
		})
	}
}

// The filter escapes every character a terminal acts on or that reorders text, keeps what text
// is made of, and a rune written in two pieces is one rune.
func TestPrintableText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, text, cell string
	}{
		{in: "plain text: 100% ok", text: "plain text: 100% ok", cell: "plain text: 100% ok"},
		{in: "two\nlines\tand a tab", text: "two\nlines\tand a tab", cell: "two lines and a tab"},
		{in: "ESC \x1b[2J BEL \x07 CR \r NUL \x00", text: `ESC \u001b[2J BEL \u0007 CR \u000d NUL \u0000`, cell: `ESC \u001b[2J BEL \u0007 CR \u000d NUL \u0000`},
		{in: "DEL \x7f C1 \u0085\u009b", text: `DEL \u007f C1 \u0085\u009b`, cell: `DEL \u007f C1 \u0085\u009b`},
		{in: "bidi \u202a\u202b\u202c\u202d\u202e \u2066\u2067\u2068\u2069 \u200e\u200f\u061c", text: `bidi \u202a\u202b\u202c\u202d\u202e \u2066\u2067\u2068\u2069 \u200e\u200f\u061c`,
			cell: `bidi \u202a\u202b\u202c\u202d\u202e \u2066\u2067\u2068\u2069 \u200e\u200f\u061c`},
		{in: "zero width \u200b, separators \u2028\u2029", text: `zero width \u200b, separators \u2028\u2029`, cell: `zero width \u200b, separators \u2028\u2029`},
		// Past U+FFFF as JSON spells it, so that JSON output stays JSON.
		{in: "tag \U000e0067", text: `tag \udb40\udc67`, cell: `tag \udb40\udc67`},
		{in: "invalid \xff\xc2", text: "invalid \ufffd\ufffd", cell: "invalid \ufffd\ufffd"},
		{in: "Grüße, 東京, עברית, 🙂", text: "Grüße, 東京, עברית, 🙂", cell: "Grüße, 東京, עברית, 🙂"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.text, printableText(tt.in), "%q", tt.in)
		assert.Equal(t, tt.cell, printable(tt.in), "%q", tt.in)
	}

	var buf bytes.Buffer
	w := newPrintableWriter(&buf)
	smile := []byte("🙂")
	for _, part := range [][]byte{[]byte("a"), smile[:1], smile[1:3], smile[3:], []byte("\x1b")} {
		n, err := w.Write(part)
		require.NoError(t, err)
		assert.Equal(t, len(part), n)
	}
	assert.Equal(t, `a🙂\u001b`, buf.String())
}

// Machine-readable output stays what its parser reads: JSON escapes what the filter escapes
// within its strings, so the values are the package's; YAML to a pipe is left as written (its
// encoder escapes control characters itself) and parses back to the same values.
func TestRenderDataOutputStaysValid(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	value := "ctl \x1b[2J\x07\r bidi \u202e\u2066\u200f emoji 👩\u200d💻 tag \U000e0067"
	quoted, err := json.Marshal(value)
	require.NoError(t, err)
	for name, body := range map[string]string{
		"manifest.yaml":  "apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata:\n  name: demo\nspec:\n  phases:\n  - name: deploy\n",
		"deploy/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n  annotations: {pkgsync.dev/phase: deploy}\ndata:\n  value: " + string(quoted) + "\n",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	}

	var stdout, stderr bytes.Buffer
	require.Zero(t, run([]string{"render", dir, "-o", "json"}, &stdout, &stderr), stderr.String())
	assertPrintable(t, stdout.String(), "render -o json")
	var got struct {
		Phases []struct {
			Objects []map[string]any `json:"objects"`
		} `json:"phases"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &got))
	require.Len(t, got.Phases, 1)
	require.Len(t, got.Phases[0].Objects, 1)
	assert.Equal(t, value, got.Phases[0].Objects[0]["data"].(map[string]any)["value"])

	stdout.Reset()
	require.Zero(t, run([]string{"render", dir}, &stdout, &stderr), stderr.String())
	for _, control := range []string{"\x1b", "\x07", "\r"} {
		assert.NotContains(t, stdout.String(), control, "YAML's encoder escapes control characters")
	}
	docs := strings.Split(stdout.String(), "---\n")
	require.Len(t, docs, 2)
	var obj map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(docs[1]), &obj))
	assert.Equal(t, value, obj["data"].(map[string]any)["value"], "a pipe gets the values as the package has them")
}

// The YAML output introduces each phase with a comment holding its name, outside any quoted
// string: a name with a line break would add documents of the package's choosing to a stream
// piped to kubectl apply, past render's rules, and one with ESC would reach the terminal raw.
func TestRenderYAMLRefusesUnprintablePhaseNames(t *testing.T) {
	t.Parallel()
	for _, name := range []string{
		"deploy\napiVersion: v1\nkind: Namespace\nmetadata: {name: injected}\n#",
		"deploy\x1b]0;pwned\x07",
		"deploy\u202e",
	} {
		dir := t.TempDir()
		quoted, err := json.Marshal(name)
		require.NoError(t, err)
		for file, body := range map[string]string{
			"manifest.yaml": "apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata:\n  name: demo\nspec:\n  phases:\n  - name: " + string(quoted) + "\n",
			"cm.yaml":       "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n  annotations: {pkgsync.dev/phase: " + string(quoted) + "}\n",
		} {
			require.NoError(t, os.WriteFile(filepath.Join(dir, file), []byte(body), 0o600))
		}
		var stdout, stderr bytes.Buffer
		code := run([]string{"render", dir}, &stdout, &stderr)
		assert.Equal(t, 1, code, "%q", name)
		assert.NotContains(t, stdout.String(), "injected", "%q", name)
		assertPrintable(t, stdout.String(), "render -o yaml")
		assert.Contains(t, stderr.String(), "cannot be written as a YAML comment", "%q", name)
	}
}

// fleet plan's table shows each member's render error, the package's text: its cells are
// escaped before the columns are aligned, so that the escapes do not shift the columns and
// nothing but the filter's spelling reaches the terminal.
func TestFleetPlanTableEscapesMessages(t *testing.T) {
	t.Parallel()
	out := fleetPlanOutput{Fleet: "addon", Revision: "9b07d4c21e5f-8e41c0d2", Fails: 1,
		Partitions: []fleetPlanPartition{{Name: "canary", Members: []fleetPlanMemberLine{
			{Namespace: "clusters-c1", HostedCluster: "clusters/c1", Result: planFails, Reason: "Render\x1b[2KFailed", Message: "deploy/cm.yaml.gotmpl:1: " + hostileText},
			{Namespace: "clusters-c2", HostedCluster: "clusters/c2", Result: planMoves},
		}}}}
	var buf bytes.Buffer
	require.NoError(t, printFleetPlan(&buf, out, false))
	assertPrintable(t, buf.String(), "fleet plan")
	assert.Contains(t, buf.String(), `Render\u001b[2KFailed  deploy/cm.yaml.gotmpl:1: \u001b]0;pwned\u0007\u001b[2K\u000dnothing to report`)
}
