package docs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "doc.md"), []byte("text pkgsync render x\n"+
		"```sh\n"+
		"pkgsync build DIR \\\n  --tag r/x:v1 --push   # a comment\n"+
		"COSIGN_PASSWORD=... pkgsync sign r/x:v1 --key cosign.key\n"+
		"kubectl get x -o yaml | pkgsync convert > out.yaml\n"+
		"bin/pkgsync validate 'a dir' [--strict]\n"+
		"```\n"+
		"```console\n"+
		"$ pkgsync fleet plan f\n"+
		"pkgsync fleet benchmark: output, not a command\n"+
		"```\n"), 0o600))
	cmds, err := Read(dir, "doc.md")
	require.NoError(t, err)
	var got [][]string
	for _, c := range cmds {
		got = append(got, append([]string{c.Where, c.Lang}, c.Args...))
	}
	assert.Equal(t, [][]string{
		{"doc.md:3", "sh", "build", "DIR", "--tag", "r/x:v1", "--push"},
		{"doc.md:5", "sh", "sign", "r/x:v1", "--key", "cosign.key"},
		{"doc.md:6", "sh", "convert"},
		{"doc.md:7", "sh", "validate", "a dir"},
		{"doc.md:10", "console", "fleet", "plan", "f"},
	}, got)
	assert.Equal(t, []string{"COSIGN_PASSWORD="}, cmds[1].Env)
	assert.Equal(t, "pkgsync fleet plan f", cmds[4].String())
}

func TestAllReadsTheRepositorysDocs(t *testing.T) {
	t.Parallel()
	cmds, err := All(filepath.Join("..", ".."))
	require.NoError(t, err)
	assert.GreaterOrEqual(t, len(cmds), 30)
}
