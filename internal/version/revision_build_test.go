package version

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRevisionOfAPlainGoBuild builds a small program that prints Revision (this package's own
// source, copied) with the go command in the layouts a developer builds in, and checks what it
// says. It is why "pkgsync version" of a plain "go build" can say "commit: unknown":
//   - a git clone's own working tree records the commit (vcs.revision);
//   - -buildvcs=false records nothing, also when it comes from GOFLAGS in the go command's
//     environment file (go env -w GOFLAGS=-buildvcs=false), which a plain go build reads;
//   - a linked worktree (git worktree add) is not a repository to the go command, which takes
//     only a .git directory for one, not a worktree's .git file (golang/go#58218): outside the
//     clone it records nothing, inside it the clone's commit, which is not the worktree's;
//   - -ldflags -X ...Commit (make build, with git rev-parse HEAD) gives the commit in every one.
//
// Should the go command come to read worktrees, the worktree cases fail here, and the hint of
// "pkgsync version" and this comment are to be updated.
func TestRevisionOfAPlainGoBuild(t *testing.T) {
	t.Parallel()
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	goBin, err := exec.LookPath("go")
	require.NoError(t, err, "the go command")
	src, err := os.ReadFile("version.go")
	require.NoError(t, err)

	root := t.TempDir()
	clone := filepath.Join(root, "clone")
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command(gitBin, append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
		return strings.TrimSpace(string(out))
	}
	for name, content := range map[string]string{
		"go.mod":             "module probe\n\ngo 1.22\n",
		"main.go":            "package main\n\nimport (\n\t\"fmt\"\n\n\t\"probe/version\"\n)\n\nfunc main() { fmt.Print(version.Revision()) }\n",
		"version/version.go": string(src),
		// The worktree nested in the clone is not the clone's.
		".gitignore": "/nested/\n",
	} {
		p := filepath.Join(clone, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	}
	git(root, "init", "-q", clone)
	git(clone, "add", "-A")
	git(clone, "commit", "-q", "-m", "first")
	first := git(clone, "rev-parse", "HEAD")
	git(clone, "commit", "-q", "--allow-empty", "-m", "second")
	head := git(clone, "rev-parse", "HEAD")
	git(clone, "worktree", "add", "-q", "--detach", filepath.Join(root, "sibling"), first)
	git(clone, "worktree", "add", "-q", "--detach", filepath.Join(clone, "nested"), first)

	n := 0
	revision := func(dir, goflags string, args ...string) string {
		t.Helper()
		n++
		bin := filepath.Join(root, "probe"+strings.Repeat("x", n))
		cmd := exec.Command(goBin, append(append([]string{"build", "-o", bin}, args...), ".")...)
		cmd.Dir = dir
		// GOFLAGS in the environment wins over the go command's environment file, which may
		// hold -buildvcs=false; no network: the program needs the standard library only.
		cmd.Env = append(os.Environ(), "GOFLAGS="+goflags, "GOWORK=off", "GOTOOLCHAIN=local", "GOPROXY=off", "GO111MODULE=on")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go build in %s: %s", dir, out)
		got, err := exec.Command(bin).Output()
		require.NoError(t, err)
		return string(got)
	}

	assert.Equal(t, head, revision(clone, "-buildvcs=auto"), "a clone records its commit")
	assert.Equal(t, Unknown, revision(clone, "-buildvcs=false"), "-buildvcs=false records none")
	assert.Equal(t, "62ee744", revision(clone, "-buildvcs=false", "-ldflags=-X probe/version.Commit=62ee744"), "a stamped commit wins")
	assert.Equal(t, Unknown, revision(filepath.Join(root, "sibling"), "-buildvcs=auto"),
		"a worktree outside the clone records none (golang/go#58218)")
	assert.Equal(t, head, revision(filepath.Join(clone, "nested"), "-buildvcs=auto"),
		"a worktree inside the clone records the clone's commit, not its own (%s)", first)
	assert.Equal(t, first, revision(filepath.Join(root, "sibling"), "-buildvcs=auto", "-ldflags=-X probe/version.Commit="+first),
		"make build's stamp is the worktree's commit")
}
