package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"oras.land/oras-go/v2/registry/remote"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/source/signature"
	"pkgsync.dev/pkgsync/test/testenv"
)

const (
	packageDir  = "packages-example/hosted-addon"
	crdDir      = "config/crd/bases"
	packageName = "demo"
	repository  = "demo/hosted-addon"
	// signingKeysSecret holds the public key the Package verifies signatures with.
	signingKeysSecret = "signing-keys"
	// signingKeyPassword encrypts the demo's throw-away private key ($COSIGN_PASSWORD).
	signingKeyPassword = "demo"
)

// errInterrupted says the user stopped the demo (Ctrl-C or SIGTERM).
var errInterrupted = errors.New("interrupted")

// demo holds everything the demo starts, so that cleanup can stop it in reverse order.
type demo struct {
	out        *narrator
	keep       bool
	timeout    time.Duration
	pkgsyncBin string

	dir      string
	registry *testenv.Registry
	// management is a cluster with its controllers, scheduler and simulated nodes, as HyperShift's
	// management clusters are; hosted is an API server alone, standing in for a hosted one.
	management *testenv.Cluster
	hosted     *testenv.ControlPlane
	mc, hc     client.Client
	controller *process
	image      string
	// signingKey is the cosign-format private key file the demo signs with; publicKey its PEM.
	signingKey string
	publicKey  []byte
}

func (d *demo) run(ctx context.Context) error {
	d.out.plain("pkgsync demo: a registry, a HyperShift-like management cluster and a hosted cluster, all local.")
	d.out.plain("It rolls a three-phase package out across both clusters, then updates it. Nothing is installed on your machine.")

	story, abort := context.WithCancelCause(ctx)
	defer abort(nil)
	story, cancel := context.WithTimeoutCause(story, d.timeout, fmt.Errorf("the demo did not finish within %s", d.timeout))
	defer cancel()

	err := d.story(story, abort)
	if err == nil && d.keep {
		d.lookAround()
		<-ctx.Done()
		d.out.plain("\nCtrl-C: cleaning up.")
	}
	if err != nil && ctx.Err() != nil {
		err = errInterrupted
	}
	if err != nil && !errors.Is(err, errInterrupted) && d.controller != nil {
		d.out.plain("\nLast lines of the controller log (%s):\n%s", d.controller.logPath, d.controller.tail(40))
	}
	d.cleanup(err != nil && !errors.Is(err, errInterrupted))
	return err
}

// story is the demo proper; every step returns an error that says what it was doing.
func (d *demo) story(ctx context.Context, abort context.CancelCauseFunc) error {
	for _, f := range []string{d.pkgsyncBin, packageDir, crdDir} {
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("%s not found: run the demo from the repository root with `make demo`: %w", f, err)
		}
	}
	bin, err := filepath.Abs(d.pkgsyncBin)
	if err != nil {
		return err
	}
	d.pkgsyncBin = bin
	if d.dir, err = os.MkdirTemp("", "pkgsync-demo-"); err != nil {
		return fmt.Errorf("create a working directory: %w", err)
	}

	if err := d.startEnvironment(ctx); err != nil {
		return err
	}
	if err := d.prepareManagementCluster(ctx); err != nil {
		return err
	}

	d.out.step("Build the example package, push it to the registry and sign it")
	d.image = d.registry.Host + "/" + repository + ":v1"
	if err := d.makeSigningKey(); err != nil {
		return err
	}
	if err := d.runPkgsync(ctx, "build", packageDir, "--tag", d.image, "--push", "--sign", "--key", d.signingKey); err != nil {
		return err
	}
	v1, err := d.resolve(ctx)
	if err != nil {
		return err
	}
	d.out.say("the tag %s now points at %s", d.image, v1)

	if err := d.startController(abort); err != nil {
		return err
	}

	watch, err := d.createPackage(ctx)
	if err != nil {
		return err
	}

	gated, gatedCancel := context.WithTimeoutCause(ctx, 45*time.Second,
		errors.New("the hosted-cluster phase did not report that it waits for the HostedCluster within 45s"))
	err = watch.until(gated, "the hosted-cluster phase to wait for the HostedCluster", func(p *v1alpha1.Package) bool {
		return apimeta.IsStatusConditionPresentAndEqual(p.Status.Conditions, meta.ReadyCondition, metav1.ConditionFalse) &&
			apimeta.FindStatusCondition(p.Status.Conditions, meta.ReadyCondition).Reason == v1alpha1.HostedClusterUnavailableReason
	})
	gatedCancel()
	if err != nil {
		return err
	}
	d.out.say("nothing was applied yet: phase 1 goes to the hosted cluster, and HyperShift does not report it Available")

	d.out.step("HyperShift reports the hosted cluster Available; the rollout goes on")
	if err := setHostedClusterAvailable(ctx, d.mc, true, "The hosted control plane is available"); err != nil {
		return err
	}
	d.out.say("set HostedCluster %s/%s status condition Available=True (through the status subresource, as HyperShift would)", hostedClusterNamespace, hostedClusterName)
	if err := watch.until(ctx, "Package "+packageName+" to be Ready with revision "+v1, readyAt(v1, "")); err != nil {
		return err
	}
	if err := d.showHostedConfig(ctx); err != nil {
		return err
	}

	if err := d.update(ctx, watch, v1); err != nil {
		return err
	}
	if err := d.summary(ctx); err != nil {
		return err
	}
	return d.fleetAct(ctx)
}

// startEnvironment starts the registry and the two control planes.
func (d *demo) startEnvironment(ctx context.Context) error {
	d.out.step("Start a registry, a management cluster and a hosted control plane")
	regDir := filepath.Join(d.dir, "registry")
	if err := os.MkdirAll(regDir, 0o755); err != nil {
		return err
	}
	var err error
	if d.registry, err = testenv.StartRegistry(ctx, regDir, testenv.RegistryOptions{}); err != nil {
		return err
	}
	d.out.say("registry (CNCF Distribution) at %s", d.registry.Host)
	// Starting a control plane takes seconds and does not watch ctx: look for Ctrl-C in between.
	if err := context.Cause(ctx); err != nil {
		return err
	}
	if d.management, err = testenv.StartCluster(ctx, "management", d.dir, testenv.ClusterOptions{}); err != nil {
		return err
	}
	d.out.say("management cluster at %s: where HyperShift runs the hosted control planes, and where pkgsync runs", d.management.Config.Host)
	d.out.detail(fmt.Sprintf("kube-apiserver, etcd, kube-controller-manager, kube-scheduler and %d nodes simulated by KWOK (pods scheduled there are reported running; no containers run)", len(d.management.Nodes)))
	if err := context.Cause(ctx); err != nil {
		return err
	}
	if d.hosted, err = testenv.StartControlPlane("hosted", d.dir); err != nil {
		return err
	}
	d.out.say("hosted cluster at %s: stands in for the API server HyperShift runs in the HCP namespace", d.hosted.Config.Host)

	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	if d.mc, err = client.New(d.management.Config, client.Options{Scheme: scheme}); err != nil {
		return fmt.Errorf("client for the management cluster: %w", err)
	}
	if d.hc, err = client.New(d.hosted.Config, client.Options{Scheme: scheme}); err != nil {
		return fmt.Errorf("client for the hosted cluster: %w", err)
	}
	return nil
}

// prepareManagementCluster installs the CRDs and sets up a HostedCluster as HyperShift would.
func (d *demo) prepareManagementCluster(ctx context.Context) error {
	d.out.step("Prepare the management cluster")
	names, err := installCRDs(ctx, d.mc, crdDir)
	if err != nil {
		return err
	}
	d.out.say("installed pkgsync's CRDs from %s: %s", crdDir, strings.Join(names, ", "))
	if err := installHyperShiftCRDs(ctx, d.mc); err != nil {
		return err
	}
	d.out.say("installed HyperShift's HostedCluster and HostedControlPlane CRDs (hypershift.openshift.io/v1beta1), trimmed to what pkgsync reads and HyperShift requires")
	endpoint, err := controlPlaneEndpoint(d.hosted.Config.Host)
	if err != nil {
		return err
	}
	hc, err := createHostedCluster(ctx, d.mc, endpoint)
	if err != nil {
		return err
	}
	d.out.say("created HostedCluster %s/%s, condition Available=False (its control plane is \"starting\")", hostedClusterNamespace, hostedClusterName)
	kubeconfig, err := d.hosted.ConnectorKubeconfig("hypershift-connector")
	if err != nil {
		return err
	}
	if err := createControlPlaneNamespace(ctx, d.mc, hc, kubeconfig); err != nil {
		return err
	}
	d.out.say("created its hosted-control-plane namespace %s with its HostedControlPlane and the connector Secret %s", hcpNamespace, "service-network-admin-kubeconfig")
	d.out.detail("(key kubeconfig: a system:masters client certificate for the hosted API server, as HyperShift writes it)")
	return nil
}

func (d *demo) startController(abort context.CancelCauseFunc) error {
	d.out.step("Start the controller")
	// The registry is on loopback: the controller reaches it only when named.
	args := []string{"controller", "--kubeconfig", d.management.KubeconfigPath, "--plain-http-registry", d.registry.Host,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0",
		"--progress-interval", "1s", "--retry-interval", "2s", "--log-development"}
	var err error
	d.controller, err = startProcess(d.pkgsyncBin, args, filepath.Join(d.dir, "controller.log"), func(exit error) {
		abort(fmt.Errorf("the controller exited unexpectedly (%w); see its log %s", exit, filepath.Join(d.dir, "controller.log")))
	})
	if err != nil {
		return err
	}
	d.out.say("$ pkgsync %s", strings.Join(args, " "))
	d.out.say("one controller for every hosted cluster: it reads each HCP namespace's connector Secret, no pod per namespace")
	d.out.say("controller log: %s", d.controller.logPath)
	return nil
}

// makeSigningKey writes a throw-away key pair in cosign's format, as `cosign generate-key-pair`
// would.
func (d *demo) makeSigningKey() error {
	private, public, err := signature.GenerateSigningKey([]byte(signingKeyPassword))
	if err != nil {
		return fmt.Errorf("generate a signing key: %w", err)
	}
	d.signingKey, d.publicKey = filepath.Join(d.dir, "cosign.key"), public
	if err := os.WriteFile(d.signingKey, private, 0o600); err != nil {
		return fmt.Errorf("write the signing key: %w", err)
	}
	return nil
}

// createPackage creates the Package in the HCP namespace and returns a watch narrating it.
func (d *demo) createPackage(ctx context.Context) (*packageWatch, error) {
	d.out.step("Create a Package in the hosted-control-plane namespace and watch the rollout")
	pkg := &v1alpha1.Package{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.PackageKind},
		ObjectMeta: metav1.ObjectMeta{Namespace: hcpNamespace, Name: packageName},
		Spec: v1alpha1.PackageSpec{
			Image:  d.image,
			Config: &apiextensionsv1.JSON{Raw: []byte(`{"replicas":2,"logLevel":"debug"}`)},
			// Set explicitly: a Go client always sends this struct field, so a zero value would
			// be stored as 0s instead of the CRD's default.
			Interval: &metav1.Duration{Duration: v1alpha1.DefaultInterval},
			Verify:   &v1alpha1.Verification{Provider: v1alpha1.VerificationProviderCosign, SecretRef: meta.LocalObjectReference{Name: signingKeysSecret}},
		},
	}
	manifest, err := yaml.Marshal(map[string]any{
		"apiVersion": pkg.APIVersion, "kind": pkg.Kind,
		"metadata": map[string]any{"namespace": pkg.Namespace, "name": pkg.Name},
		"spec": map[string]any{"image": pkg.Spec.Image, "config": map[string]any{"replicas": 2, "logLevel": "debug"},
			"verify": map[string]any{"provider": "cosign", "secretRef": map[string]any{"name": signingKeysSecret}}},
	})
	if err != nil {
		return nil, err
	}
	keys := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: hcpNamespace, Name: signingKeysSecret},
		Data: map[string][]byte{"cosign.pub": d.publicKey}}
	if err := d.mc.Create(ctx, keys); err != nil {
		return nil, fmt.Errorf("create Secret %s/%s: %w", hcpNamespace, signingKeysSecret, err)
	}
	d.out.say("created Secret %s/%s with cosign.pub: spec.verify applies only digests it verifies a signature of, checked before anything is pulled", hcpNamespace, signingKeysSecret)
	if err := d.mc.Create(ctx, pkg); err != nil {
		return nil, fmt.Errorf("create Package %s/%s: %w", hcpNamespace, packageName, err)
	}
	d.out.say("created:")
	d.out.block(string(manifest))
	return newPackageWatch(d.out, d.mc, client.ObjectKeyFromObject(pkg)), nil
}

// showHostedConfig reads, from the hosted cluster itself, what phase 3 put there.
func (d *demo) showHostedConfig(ctx context.Context) error {
	var cm corev1.ConfigMap
	if err := d.hc.Get(ctx, client.ObjectKey{Namespace: "hosted-addon", Name: "hosted-addon-config"}, &cm); err != nil {
		return fmt.Errorf("read the ConfigMap of phase 3 from the hosted cluster: %w", err)
	}
	d.out.say("on the hosted cluster, ConfigMap hosted-addon/hosted-addon-config says greeting=%q, hostedCluster=%q",
		cm.Data["greeting"], cm.Data["hostedCluster"])
	return nil
}

// update pushes version 2 to the same tag, asks for a reconcile and shows the update and prune.
func (d *demo) update(ctx context.Context, watch *packageWatch, v1 string) error {
	d.out.step("Push version 2 to the same tag and ask for a reconcile")
	v2dir := filepath.Join(d.dir, "hosted-addon-v2")
	if err := makeV2(packageDir, v2dir); err != nil {
		return err
	}
	d.out.say("version 2 (%s): the greeting default is now %q, and Role %s is gone", v2dir, v2Greeting, v2DroppedRole)
	if err := d.runPkgsync(ctx, "push", v2dir, d.image); err != nil {
		return err
	}
	if err := d.runPkgsync(ctx, "sign", d.image, "--key", d.signingKey); err != nil {
		return err
	}
	v2, err := d.resolve(ctx)
	if err != nil {
		return err
	}
	if v2 == v1 {
		return fmt.Errorf("version 2 has the digest of version 1 (%s): the edits changed nothing", v1)
	}
	d.out.say("the tag %s now points at %s", d.image, v2)

	token := time.Now().UTC().Format(time.RFC3339Nano)
	patch := client.RawPatch("application/merge-patch+json",
		fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, meta.ReconcileRequestAnnotation, token))
	pkg := &v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{Namespace: hcpNamespace, Name: packageName}}
	if err := d.mc.Patch(ctx, pkg, patch); err != nil {
		return fmt.Errorf("annotate Package %s/%s: %w", hcpNamespace, packageName, err)
	}
	d.out.say("annotated the Package %s=%s (as `flux reconcile` does): reconcile now instead of at the next interval", meta.ReconcileRequestAnnotation, token)
	if err := watch.until(ctx, "Package "+packageName+" to be Ready with revision "+v2, readyAt(v2, token)); err != nil {
		return err
	}

	var role rbacv1.Role
	err = d.hc.Get(ctx, client.ObjectKey{Namespace: "hosted-addon", Name: v2DroppedRole}, &role)
	switch {
	case err == nil:
		return fmt.Errorf("role hosted-addon/%s should have been pruned from the hosted cluster, but it is still there", v2DroppedRole)
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("check that Role hosted-addon/%s was pruned from the hosted cluster: %w", v2DroppedRole, err)
	}
	d.out.say("on the hosted cluster, Role hosted-addon/%s is gone", v2DroppedRole)
	return d.showHostedConfig(ctx)
}

// readyAt says a Package is Ready on revision, having handled the reconcile request token.
func readyAt(revision, token string) func(*v1alpha1.Package) bool {
	return func(p *v1alpha1.Package) bool {
		return apimeta.IsStatusConditionTrue(p.Status.Conditions, meta.ReadyCondition) &&
			p.Status.ObservedGeneration == p.Generation &&
			p.Status.LastAppliedRevision == revision &&
			(token == "" || p.Status.LastHandledReconcileAt == token)
	}
}

// resolve asks the registry which digest the tag points at.
func (d *demo) resolve(ctx context.Context) (string, error) {
	return d.resolveTag(ctx, repository, "v1")
}

// resolveTag asks the registry which digest a tag of a repository points at.
func (d *demo) resolveTag(ctx context.Context, repository, tag string) (string, error) {
	repo, err := remote.NewRepository(d.registry.Host + "/" + repository)
	if err != nil {
		return "", err
	}
	repo.PlainHTTP = true
	desc, err := repo.Resolve(ctx, tag)
	if err != nil {
		return "", fmt.Errorf("resolve %s/%s:%s: %w", d.registry.Host, repository, tag, err)
	}
	return desc.Digest.String(), nil
}

// summary shows what exists on each cluster, found by pkgsync's ownership labels.
func (d *demo) summary(ctx context.Context) error {
	d.out.step("Summary: what pkgsync created, found on each cluster by its label %s", "pkgsync.dev/owner-name")
	for _, cp := range []*testenv.ControlPlane{d.hosted, d.management.ControlPlane} {
		objs, err := ownedObjects(ctx, cp.Config)
		if err != nil {
			return fmt.Errorf("list objects on the %s cluster: %w", cp.Name, err)
		}
		d.out.plain("    %s cluster (%s):", cp.Name, count(len(objs), "object"))
		for _, o := range objs {
			d.out.plain("      %-60s owned by %s", o, o.Owner)
		}
	}
	var pkg v1alpha1.Package
	if err := d.mc.Get(ctx, client.ObjectKey{Namespace: hcpNamespace, Name: packageName}, &pkg); err != nil {
		return fmt.Errorf("read Package: %w", err)
	}
	d.out.plain("\n    Package %s/%s: %s", pkg.Namespace, pkg.Name, readyOf(&pkg))
	d.out.plain("      image %s, revision %s", pkg.Spec.Image, pkg.Status.LastAppliedRevision)
	for _, h := range pkg.Status.History {
		d.out.plain("      history: %s applied at %s", h.Revision, h.AppliedAt.Format(time.RFC3339))
	}
	if kubectl, err := exec.LookPath("kubectl"); err == nil {
		args := []string{"--kubeconfig", d.management.KubeconfigPath, "get", "packages", "-A"}
		out, err := exec.CommandContext(ctx, kubectl, args...).CombinedOutput()
		d.out.plain("\n    $ kubectl get packages -A")
		d.out.block(string(out))
		if err != nil {
			d.out.plain("    (kubectl failed: %v)", err)
		}
	}
	return nil
}

// lookAround prints how to explore what KEEP=1 left running.
func (d *demo) lookAround() {
	m, h := d.management.KubeconfigPath, d.hosted.KubeconfigPath
	d.out.plain(`
Everything keeps running (KEEP=1). Look around from another terminal:

  export MGMT=%s
  export HOSTED=%s
  kubectl --kubeconfig $MGMT get packages -A
  kubectl --kubeconfig $MGMT get package -n %s %s -o yaml
  kubectl --kubeconfig $MGMT get deployments,secrets -n %s
  kubectl --kubeconfig $MGMT get hostedclusters -A
  kubectl --kubeconfig $HOSTED get namespaces,clusterroles,configmaps -l %s=%s -A
  kubectl --kubeconfig $MGMT wait --for=condition=Ready package/%s -n %s

  registry:       %s  (bin/pkgsync push DIR %s/demo/other:v1)
  controller log: %s

The management cluster runs kube-controller-manager, kube-scheduler and KWOK's simulated
nodes: Deployments there roll out by themselves (kubectl --kubeconfig $MGMT get pods -A -o wide).
The hosted cluster is an API server alone: nothing runs its Deployments' pods.

Press Ctrl-C to stop everything and clean up.`,
		m, h, hcpNamespace, packageName, hcpNamespace, "pkgsync.dev/owner-name", packageName,
		packageName, hcpNamespace, d.registry.Host, d.registry.Host, d.controller.logPath)
}

// cleanup stops everything the demo started, newest first. After a failure the working
// directory (controller log, kubeconfigs) is kept for a look.
func (d *demo) cleanup(failed bool) {
	var errs []error
	if err := d.controller.stop(10 * time.Second); err != nil {
		errs = append(errs, err)
	}
	if d.hosted != nil {
		errs = append(errs, d.hosted.Stop())
	}
	if d.management != nil {
		errs = append(errs, d.management.Stop())
	}
	if d.registry != nil {
		errs = append(errs, d.registry.Stop())
	}
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(os.Stderr, "cleanup: %v\n", err)
	}
	switch {
	case d.dir == "":
	case failed:
		fmt.Fprintf(os.Stderr, "Stopped everything; kept %s (controller log, kubeconfigs) for a look.\n", d.dir)
	default:
		if err := os.RemoveAll(d.dir); err != nil {
			fmt.Fprintf(os.Stderr, "cleanup: %v\n", err)
		}
		d.out.plain("Stopped the controller, both control planes and the registry; removed %s.", d.dir)
	}
}
