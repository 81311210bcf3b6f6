package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/test/testenv"
)

var (
	crashBinaryOnce sync.Once
	crashBinaryPath string
	crashBinaryErr  error
)

// crashBinary builds pkgsync once per test run: crashes need a process of its own to kill.
func crashBinary(t *testing.T) string {
	t.Helper()
	crashBinaryOnce.Do(func() {
		dir, err := os.MkdirTemp("", "pkgsync-crash-")
		if err != nil {
			crashBinaryErr = err
			return
		}
		crashBinaryPath = filepath.Join(dir, "pkgsync")
		out, err := exec.Command("go", "build", "-o", crashBinaryPath, "../../cmd/pkgsync").CombinedOutput()
		if err != nil {
			crashBinaryErr = fmt.Errorf("go build: %w: %s", err, out)
		}
	})
	require.NoError(t, crashBinaryErr)
	return crashBinaryPath
}

// startControllerProcess runs `pkgsync controller` for the resources labelled shard, as a user
// runs it, and kills it with SIGKILL when the test ends.
func startControllerProcess(t *testing.T, bin, kubeconfig, shard string) *exec.Cmd {
	t.Helper()
	log, err := os.OpenFile(filepath.Join(t.TempDir(), "controller.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(t, err)
	t.Cleanup(func() { _ = log.Close() })
	cmd := exec.Command(bin, "controller", "--kubeconfig", kubeconfig, "--plain-http-registry", suite.registry.Host,
		"--watch-label-selector", shardLabel+"="+shard, "--metrics-bind-address", "0", "--health-probe-bind-address", "0",
		"--progress-interval", "200ms", "--retry-interval", "500ms", "--disable-hosted-clusters")
	cmd.Stdout, cmd.Stderr = log, log
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
		}
	})
	return cmd
}

// crashPackage has three phases of eight ConfigMaps: a pass writes 24 objects one by one.
func crashPackage() map[string]string {
	files := map[string]string{
		"manifest.yaml": "apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata:\n  name: crash\nspec:\n  phases:\n  - name: one\n  - name: two\n  - name: three\n",
	}
	var b strings.Builder
	for _, phase := range []string{"one", "two", "three"} {
		for i := range 8 {
			fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: '{{ .package.name }}-%s-%d'\n  annotations:\n    pkgsync.dev/phase: %s\ndata:\n  n: \"%d\"\n", phase, i, phase, i)
		}
	}
	files["objects.yaml.gotmpl"] = b.String()
	return files
}

// ownedConfigMaps counts the ConfigMaps of ns that carry the ownership labels of Package name.
func ownedConfigMaps(ctx context.Context, ns, name string) (int, error) {
	var list corev1.ConfigMapList
	err := suite.mgmtClient.List(ctx, &list, client.InNamespace(ns),
		client.MatchingLabels{apply.LabelOwnerNamespace: ns, apply.LabelOwnerName: name})
	return len(list.Items), err
}

// TestCrashBetweenApplyAndStatusOrphansNothing kills the controller process with SIGKILL in the
// middle of a pass, 20 times at different points, deletes the Package while no controller
// runs, then lets a new controller process finalize it: nothing it created may stay behind.
func TestCrashBetweenApplyAndStatusOrphansNothing(t *testing.T) {
	// Not parallel: it kills controller processes 40 times, polling the API server without a pause
	// to catch each mid-pass.
	bin := crashBinary(t)
	kc, err := testenv.KubeconfigFor("crash", suite.mgmt.Config)
	require.NoError(t, err)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, kc, 0o600))
	ns := newNamespace(t)
	image := suite.registry.Host + "/e2e/" + ns + "/crash:v1"
	pushPackage(t, writePackage(t, crashPackage()), "e2e/"+ns+"/crash:v1")

	killedMidPass := 0
	for i := range 20 {
		name := fmt.Sprintf("crash-%d", i)
		ctrlProc := startControllerProcess(t, bin, kubeconfig, "crash")
		pkg := newPackage(ns, name, image, "")
		pkg.Labels = map[string]string{shardLabel: "crash"}
		require.NoError(t, suite.mgmtClient.Create(t.Context(), pkg))

		// Kill once the pass has written i+1 objects (or later, if it was quicker than the poll).
		want := i + 1
		deadline := time.Now().Add(timeout)
		for {
			n, err := ownedConfigMaps(t.Context(), ns, name)
			require.NoError(t, err)
			if n >= want || time.Now().After(deadline) {
				break
			}
		}
		require.NoError(t, ctrlProc.Process.Signal(syscall.SIGKILL))
		_ = ctrlProc.Wait()
		if n, _ := ownedConfigMaps(t.Context(), ns, name); n < 24 {
			killedMidPass++
		}

		require.NoError(t, suite.mgmtClient.Delete(t.Context(), pkg))
		after := startControllerProcess(t, bin, kubeconfig, "crash")
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			err := suite.mgmtClient.Get(t.Context(), client.ObjectKeyFromObject(pkg), &v1alpha1.Package{})
			assert.True(ct, apierrors.IsNotFound(err), "Package %s still there: %v", name, err)
		}, timeout, interval)
		require.NoError(t, after.Process.Signal(syscall.SIGKILL))
		_ = after.Wait()

		n, err := ownedConfigMaps(t.Context(), ns, name)
		require.NoError(t, err)
		assert.Zero(t, n, "iteration %d: objects of the deleted Package %s were left behind", i, name)
	}
	t.Logf("killed mid-pass in %d of 20 iterations", killedMidPass)
	assert.Positive(t, killedMidPass, "the test must kill the controller in the middle of a pass")
}
