package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// One --dry-run=none|client|server, kubectl's, on apply and install; apply's former bool
// spellings still mean a server-side dry run (none for =false), with a deprecation warning.
func TestDryRunFlag(t *testing.T) {
	t.Parallel()
	pkg := writeDiffPackage(t)
	lost := nowhereKubeconfig(t, "team")
	apply := []string{"apply", pkg, "--kubeconfig", lost}
	install := []string{"install", "--image", "registry.example.com/pkgsync:v1", "--kubeconfig", lost}
	tests := []struct {
		name       string
		args       []string
		code       int
		stdout     string
		stderr     string
		errMessage string
	}{
		{name: "apply client: nothing sent", args: append(apply, "--dry-run=client"),
			stdout: "ConfigMap diffed (dry run)\nSecret diffed (dry run)\nConfigMap default/inside (dry run)\n", stderr: "nothing was sent to a cluster"},
		{name: "apply server", args: append(apply, "--dry-run=server"), code: 1, errMessage: "127.0.0.1:1"},
		{name: "apply none", args: append(apply, "--dry-run=none"), code: 1, errMessage: "127.0.0.1:1"},
		{name: "apply bare: deprecated server", args: append(apply, "--dry-run"), code: 1, errMessage: "127.0.0.1:1",
			stderr: "Flag --dry-run without a value, =true or =false has been deprecated, use --dry-run=server\n"},
		{name: "apply =false: deprecated none", args: append(apply, "--dry-run=false"), code: 1, errMessage: "127.0.0.1:1",
			stderr: "use --dry-run=none\n"},
		{name: "apply bogus", args: append(apply, "--dry-run=maybe"), code: 2, errMessage: `must be "none", "client" or "server"`},
		{name: "apply --wait with a dry run", args: append(apply, "--dry-run=server", "--wait"), code: 2, errMessage: "exclude each other"},
		{name: "install client", args: append(install, "--dry-run=client"), stderr: "nothing was sent to a cluster"},
		{name: "install none", args: append(install, "--dry-run=none"), code: 1, errMessage: "127.0.0.1:1"},
		{name: "install needs a value", args: append(install, "--dry-run"), code: 2, errMessage: "flag needs an argument: --dry-run"},
		{name: "install refuses a bool", args: append(install, "--dry-run=true"), code: 2, errMessage: "use --dry-run=none, client or server"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, err := runCLI(t, tt.args...)
			assert.Equal(t, tt.code, exitCodeOf(err), "%v\n%s", err, stderr)
			if tt.errMessage != "" {
				assert.ErrorContains(t, err, tt.errMessage)
			}
			if tt.stdout != "" {
				assert.Equal(t, tt.stdout, stdout)
			}
			assert.Contains(t, stderr, tt.stderr)
		})
	}
}
