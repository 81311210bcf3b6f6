package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/test/docs"
)

// repositoryRoot is the repository, from this package's directory.
var repositoryRoot = filepath.Join("..", "..")

// docsRule says what TestDocsCommands does with the documented commands it matches: why one
// is not run, or the exit codes the docs promise for it (0 when none is given).
type docsRule struct {
	// path is the command's first arguments (fleet status), flag a flag it must carry too
	// (empty: any), and image a prefix of an argument it must have (empty: any).
	path        []string
	flag, image string
	skip        string
	codes       []int
}

// docsRules are matched in order; a command no rule skips runs and must exit 0.
var docsRules = []docsRule{
	{path: []string{"install"}, flag: "--verify-key", skip: "verifies the release's controller image with the release key, which is not in the repository"},
	{path: []string{"verify"}, image: "ghcr.io/", skip: "verifies a release image on ghcr.io, which the tests do not reach"},
	{path: []string{"controller"}, skip: "runs until it is stopped; the suite runs the controller (crash_test.go as a process)"},
	{path: []string{"fleet", "status"}, flag: "--watch", skip: "follows the fleet until it is interrupted; fleet_watch_test.go in cmd/pkgsync runs it"},
	{path: []string{"validate"}, skip: "needs neither a cluster nor a registry: cmd/pkgsync's TestExampleREADMECommands runs it"},
	{path: []string{"render"}, skip: "needs neither a cluster nor a registry: cmd/pkgsync's TestExampleREADMECommands runs it"},
	{path: []string{"fleet", "approve"}, skip: "approves a partition the rollout waits on, which the docs' fleet does not gate: TestFleetApproval runs it on one that does"},
	{path: []string{"convert"}, skip: "reads the reader's own files (hcpkg.yaml) or kubectl's output on stdin"},
	// Commands that compare: 1 is "differences found", "a member would fail".
	{path: []string{"diff"}, codes: []int{0, 1}},
	{path: []string{"fleet", "plan"}, codes: []int{0, 1}},
}

func (r docsRule) matches(c docs.Command) bool {
	if len(c.Args) < len(r.path) || !slices.Equal(c.Args[:len(r.path)], r.path) {
		return false
	}
	if r.flag != "" && !slices.Contains(c.Args, r.flag) {
		return false
	}
	return r.image == "" || slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, r.image) })
}

// ruleFor is the first rule that matches c, the zero rule (run, exit 0) when none does.
func ruleFor(c docs.Command) docsRule {
	for _, r := range docsRules {
		if r.matches(c) {
			return r
		}
	}
	return docsRule{}
}

// shellBlock tells whether a code block's language is a shell's: other blocks (output, YAML)
// quote pkgsync lines that are not commands to run.
func shellBlock(lang string) bool {
	return slices.Contains([]string{"sh", "bash", "shell", "console"}, lang)
}

// TestDocsCommands runs every pkgsync command line the README, docs/ and the examples' READMEs
// show in a shell block, document by document in their order, as a reader would type them:
// against the suite's management API server and registry, in a working directory and home of
// the test's own where the files they name exist (./my-package, values.yaml, cosign.key once
// "key generate" wrote it). What names a shared place is the test's: registry.example.com is
// the suite's registry under a repository of the test's, every kubeconfig is the suite's, -n
// (and install's namespace) is a namespace of the test's, and the fleet hosted-addon is a fleet
// of the test's, created from docs/fleet.md's hosted-addon-fleet.yaml. Each must exit as the docs
// say; a command that cannot run here is named in docsRules with why, so a new one is run or
// explained. cmd/pkgsync's TestDocsShowOnlyCommandsAndFlagsThatExist parses every one.
func TestDocsCommands(t *testing.T) {
	t.Parallel()
	all, err := docs.All(repositoryRoot)
	require.NoError(t, err)
	d := newDocsRun(t)
	ran := 0
	for _, c := range all {
		if !shellBlock(c.Lang) {
			continue
		}
		rule := ruleFor(c)
		if rule.skip != "" {
			t.Logf("%s: %s: not run: %s", c.Where, c, rule.skip)
			continue
		}
		codes := rule.codes
		if codes == nil {
			codes = []int{0}
		}
		code, out := d.run(c)
		assert.Contains(t, codes, code, "%s: %s exits %d, the docs say %v:\n%s", c.Where, c, code, codes, out)
		ran++
	}
	assert.GreaterOrEqual(t, ran, 20, "documented commands run")
}

// docsRun is where TestDocsCommands runs the documented commands, and what they need that the
// docs make by other means (an editor, kubectl).
type docsRun struct {
	t *testing.T
	// dir is the working directory and home; root the repository, absolute.
	dir, root  string
	kubeconfig string
	// namespace replaces every -n and is install's.
	namespace string
	// registry replaces registry.example.com: the suite's registry, a repository of the test's.
	registry string
	// fleet replaces the fleet name hosted-addon; created tells whether it exists yet.
	fleet        string
	fleetCreated bool
	// pkg is the Package my-package "diff package" compares, created on first use.
	pkgCreated bool
}

func newDocsRun(t *testing.T) *docsRun {
	t.Helper()
	ns := newNamespace(t)
	root, err := filepath.Abs(repositoryRoot)
	require.NoError(t, err)
	d := &docsRun{
		t: t, dir: t.TempDir(), root: root, kubeconfig: managementKubeconfig(t), namespace: ns,
		registry: suite.registry.Host + "/docs-" + ns, fleet: "docs-" + ns[len(ns)-8:],
	}
	// The packages the docs build and diff: docs/operations.md's ./my-package, docs/fleet.md's
	// next versions of hosted-addon.
	copyDir(t, filepath.Join(repositoryRoot, "packages-example", "simple"), filepath.Join(d.dir, "my-package"))
	for _, v := range []string{"1.2.0", "1.2.1"} {
		copyDir(t, filepath.Join(repositoryRoot, "packages-example", "hosted-addon"), filepath.Join(d.dir, "hosted-addon-"+v))
	}
	require.NoError(t, os.WriteFile(filepath.Join(d.dir, "values.yaml"), []byte("{}\n"), 0o600))
	// docs/operations.md diffs my-package:v2, the next version it does not show being built.
	pushPackageTo(t, filepath.Join(d.dir, "my-package"), d.registry+"/team/my-package:v2")
	// install's cluster-scoped objects; its namespace goes with the test's.
	t.Cleanup(func() {
		ctx := context.WithoutCancel(t.Context())
		for _, name := range []string{"pkgsync-manager", "pkgsync-connector-secrets", "pkgsync-apply"} {
			assert.NoError(t, client.IgnoreNotFound(suite.mgmtClient.Delete(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}})))
			assert.NoError(t, client.IgnoreNotFound(suite.mgmtClient.Delete(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}})))
		}
	})
	return d
}

// args are c's arguments with what names a shared place replaced by the test's own.
func (d *docsRun) args(c docs.Command) []string {
	var out []string
	for i, a := range c.Args {
		prev := ""
		if i > 0 {
			prev = c.Args[i-1]
		}
		switch {
		case prev == "--kubeconfig":
			a = d.kubeconfig
		case prev == "-n" || prev == "--namespace":
			a = d.namespace
		case i == 2 && c.Args[0] == "fleet" && a == "hosted-addon":
			a = d.fleet
		case strings.HasPrefix(a, "registry.example.com/"):
			a = d.registry + strings.TrimPrefix(a, "registry.example.com")
		case strings.HasPrefix(a, "packages-example/"):
			a = filepath.Join(d.root, a) // the repository's, as the docs run from a checkout
		}
		out = append(out, a)
	}
	if c.Args[0] == "install" && !slices.Contains(c.Args, "-n") && !slices.Contains(c.Args, "--namespace") {
		out = append(out, "-n", d.namespace)
	}
	return out
}

// run runs the command c as documented and returns its exit code and output.
func (d *docsRun) run(c docs.Command) (int, string) {
	t := d.t
	t.Helper()
	switch {
	case c.Args[0] == "fleet":
		d.createFleet()
	case len(c.Args) > 1 && c.Args[0] == "diff" && c.Args[1] == "package":
		d.createPackage()
	}
	args := d.args(c)
	cmd := exec.CommandContext(t.Context(), crashBinary(t), args...)
	cmd.Dir = d.dir
	cmd.Env = append(os.Environ(), "HOME="+d.dir, "KUBECONFIG="+d.kubeconfig, "COSIGN_PASSWORD=", "DOCKER_CONFIG="+filepath.Join(d.dir, ".docker"))
	cmd.Env = append(cmd.Env, c.Env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var runErr error
	if c.Args[0] == "install" {
		// install waits until the controller Deployment is Available: play the Deployment
		// controller, which the suite's API server does not run, until it returns.
		runErr = d.playDeploymentController(exited)
	} else {
		runErr = <-exited
	}
	var exit *exec.ExitError
	if runErr != nil && !errors.As(runErr, &exit) {
		require.NoError(t, runErr)
	}
	t.Logf("%s: pkgsync %s\n%s", c.Where, strings.Join(args, " "), out.String())
	return cmd.ProcessState.ExitCode(), out.String()
}

// playDeploymentController marks install's controller Deployment rolled out and available, as
// kube-controller-manager would, until the install exits; it returns how it exited.
func (d *docsRun) playDeploymentController(exited <-chan error) error {
	var runErr error
	done := false
	eventually(d.t, func(a *attempt) {
		if !done {
			select {
			case runErr = <-exited:
				done = true
			default:
			}
		}
		if done {
			return
		}
		var deploy appsv1.Deployment
		if err := suite.mgmtClient.Get(a.Context(), client.ObjectKey{Namespace: d.namespace, Name: "pkgsync-controller"}, &deploy); err == nil &&
			deploy.Status.ObservedGeneration != deploy.Generation {
			replicas := int32(1)
			if deploy.Spec.Replicas != nil {
				replicas = *deploy.Spec.Replicas
			}
			deploy.Status = appsv1.DeploymentStatus{
				ObservedGeneration: deploy.Generation, Replicas: replicas, UpdatedReplicas: replicas, ReadyReplicas: replicas, AvailableReplicas: replicas,
				Conditions: []appsv1.DeploymentCondition{
					{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
					{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
				},
			}
			assert.NoError(a, suite.mgmtClient.Status().Update(a.Context(), &deploy))
		}
		assert.True(a, done, "install has not returned")
	})
	return runErr
}

// createFleet creates the fleet of docs/fleet.md from its hosted-addon-fleet.yaml, under the
// test's name and registry, before the first fleet command (after the image it follows is
// pushed).
func (d *docsRun) createFleet() {
	if d.fleetCreated {
		return
	}
	t := d.t
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repositoryRoot, "docs", "fleet.md"))
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)```yaml\n# hosted-addon-fleet.yaml\n(.*?)```").FindSubmatch(data)
	require.NotNil(t, m, "docs/fleet.md shows hosted-addon-fleet.yaml")
	doc := strings.ReplaceAll(string(m[1]), "registry.example.com", d.registry)
	fleet := &v1alpha1.HostedClusterPackage{}
	require.NoError(t, yaml.UnmarshalStrict([]byte(doc), fleet), "hosted-addon-fleet.yaml is a HostedClusterPackage")
	fleet.Name = d.fleet
	newFleet(t, fleet)
	d.fleetCreated = true
}

// createPackage creates the Package my-package that docs/operations.md's "diff package" compares,
// following the image "build --push" pushed.
func (d *docsRun) createPackage() {
	if d.pkgCreated {
		return
	}
	require.NoError(d.t, suite.mgmtClient.Create(d.t.Context(), newPackage(d.namespace, "my-package", d.registry+"/team/my-package:v1", "")))
	d.pkgCreated = true
}

// copyDir copies the regular files of the directory src to dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(src, func(p string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if e.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !e.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file", p)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o600)
	}))
}
