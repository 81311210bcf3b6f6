package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/config"
	"pkgsync.dev/pkgsync/internal/version"
	"pkgsync.dev/pkgsync/source"
	"pkgsync.dev/pkgsync/source/signature"
)

// clusterFlags select the management cluster and where pkgsync lives in it.
type clusterFlags struct {
	kube      *kubeFlags
	namespace string
	wait      bool
	timeout   time.Duration
}

func (o *clusterFlags) validate() error {
	if errs := validation.IsDNS1123Label(o.namespace); len(errs) > 0 {
		return usageError("--namespace %q: %s", o.namespace, strings.Join(errs, "; "))
	}
	if o.timeout <= 0 {
		return usageError("--timeout %s: must be positive", o.timeout)
	}
	return nil
}

func (o *clusterFlags) ApplyFlags(fs *pflag.FlagSet) {
	o.kube = newKubeFlags(fs, kubeconfigUsage)
	fs.StringVarP(&o.namespace, "namespace", "n", config.DefaultNamespace, "Namespace of the controller")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "How long --wait waits")
}

// installFlags are the flags of install besides the cluster.
type installFlags struct {
	image      string
	dryRun     *dryRunFlag
	export     bool
	lockdown   bool
	verifyKeys []string
	// verifyAttestations are the attestation types the verified image must carry too.
	verifyAttestations []string
	// Keyless verification: a certificate from the trusted root's CA issued to one of the
	// identities (subjects) by the issuer.
	verifyIdentities []string
	verifyIssuer     string
	trustedRoot      string
	registry         registryOptions
	output           *outputFlag
}

func (o *installFlags) ApplyFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.image, "image", "", "Controller image REGISTRY/REPOSITORY[:TAG][@DIGEST] (default "+version.Image()+", the image of this release)")
	o.dryRun = addDryRunFlag(fs, false, `"client" prints what would be applied without contacting the cluster; "server" sends every object as a server-side dry run`)
	fs.BoolVar(&o.export, "export", false, "Print the manifests as YAML instead of applying them (kubectl apply --server-side -f reads them)")
	fs.BoolVar(&o.lockdown, "lockdown", false, "Install config/lockdown, for management clusters shared with tenants: namespaced resources "+
		"act as the ServiceAccount pkgsync of their namespace (docs/operations.md, security model)")
	fs.StringArrayVar(&o.verifyKeys, "verify-key", nil, "Public key file (cosign.pub) the controller image must be signed with: "+
		"install verifies the signature first and pins the Deployment to the verified digest; any of several may match (repeatable)")
	fs.StringArrayVar(&o.verifyAttestations, "verify-attestation", nil, "With --verify-key, also require a signed attestation of this type about the verified digest: "+
		"slsaprovenance1 (the release's provenance), spdxjson (its SBOM) or a predicate type URI (repeatable)")
	fs.StringArrayVar(&o.verifyIdentities, "verify-identity", nil, "Verify a keyless signature instead of a key: a regular expression (RE2, whole value) "+
		"the signing certificate's subject must match, such as https://github\\.com/org/repo/\\.github/workflows/release\\.yml@refs/tags/v.* (repeatable; any may match); "+
		"needs --verify-oidc-issuer and --trusted-root")
	fs.StringVar(&o.verifyIssuer, "verify-oidc-issuer", "", "With --verify-identity: a regular expression the OIDC issuer that vouched for the signer must match")
	fs.StringVar(&o.trustedRoot, "trusted-root", "", "With --verify-identity: the Sigstore trusted root (trusted_root.json, as cosign trusted-root create writes it); nothing is fetched")
	o.registry.ApplyFlags(fs)
	o.output = addOutputFlag(fs, outputText)
}

// verifying says whether install verifies the controller image, and checks the flags that
// say how make sense together.
func (o *installFlags) verifying() (bool, error) {
	keyless := len(o.verifyIdentities) > 0 || o.verifyIssuer != "" || o.trustedRoot != ""
	switch {
	case keyless && len(o.verifyKeys) > 0:
		return false, usageError("--verify-key and --verify-identity exclude each other: the image is verified with a key or keylessly")
	case keyless && (len(o.verifyIdentities) == 0 || o.verifyIssuer == "" || o.trustedRoot == ""):
		return false, usageError("keyless verification needs --verify-identity, --verify-oidc-issuer and --trusted-root together")
	case len(o.verifyAttestations) > 0 && len(o.verifyKeys) == 0:
		return false, usageError("--verify-attestation needs --verify-key: the key the attestations are signed with")
	}
	return keyless || len(o.verifyKeys) > 0, nil
}

// verifyKeyless checks img's keyless signature against the trusted root and identities.
func (o *installFlags) verifyKeyless(ctx context.Context, client *source.Client, ref source.Reference) (*signature.Verification, error) {
	trusted, err := os.ReadFile(o.trustedRoot)
	if err != nil {
		return nil, fmt.Errorf("read --trusted-root: %w", err)
	}
	ids := make([]signature.OIDCIdentity, len(o.verifyIdentities))
	for i, subject := range o.verifyIdentities {
		ids[i] = signature.OIDCIdentity{Issuer: o.verifyIssuer, Subject: subject}
	}
	policy, err := signature.NewKeylessPolicy(trusted, ids)
	if err != nil {
		return nil, usageError("--trusted-root, --verify-identity: %w", err)
	}
	return signature.VerifyKeyless(ctx, client, ref, policy, nil)
}

// verifiedImage checks that img carries a cosign signature by one of --verify-key (or a keyless
// one by --verify-identity) and returns
// it pinned to the digest that was verified, so the Deployment runs exactly what was checked
// even if the tag moves afterwards.
func (o *installFlags) verifiedImage(ctx context.Context, stderr io.Writer, img string) (string, error) {
	var keys *signature.PublicKeys
	if len(o.verifyKeys) > 0 {
		var err error
		if keys, err = readPublicKeys("--verify-key", o.verifyKeys); err != nil {
			return "", err
		}
	}
	var err error
	types := make([]string, len(o.verifyAttestations))
	for i, a := range o.verifyAttestations {
		if types[i], err = predicateType(a); err != nil {
			return "", err
		}
	}
	ref, err := source.ParseReference(img)
	if err != nil {
		return "", usageError("--image: %w", err)
	}
	client, err := o.registry.client(stderr, ref)
	if err != nil {
		return "", err
	}
	var v *signature.Verification
	if keys != nil {
		v, err = signature.Verify(ctx, client, ref, keys, nil)
	} else {
		v, err = o.verifyKeyless(ctx, client, ref)
	}
	if err != nil {
		return "", fmt.Errorf("the controller image is not installed: %w", err)
	}
	for _, t := range types {
		a, err := signature.VerifyAttestation(ctx, client, ref.WithDigest(v.Digest), keys, t, nil)
		if err != nil {
			return "", fmt.Errorf("the controller image is not installed: %w", err)
		}
		fmt.Fprintf(stderr, "verified the %s attestation of %s with %s\n", a.PredicateType, img, a.Key)
	}
	pinned := ref.Name() + "@" + v.Digest
	fmt.Fprintf(stderr, "verified %s with %s: installing %s\n", img, v.Key, pinned)
	return pinned, nil
}

func (o *installFlags) variant() config.Variant {
	if o.lockdown {
		return config.Lockdown
	}
	return config.Default
}

func newInstallCmd() *cobra.Command {
	var (
		cluster clusterFlags
		flags   installFlags
	)
	cmd := &cobra.Command{
		Use:   "install [--image REF] [--namespace NS] [--dry-run=none|client|server] [--export]",
		Short: "Install the pkgsync CRDs, RBAC and controller on a management cluster",
		Long: `Install applies what config/default holds (config/lockdown with --lockdown), embedded in this
binary, with server-side apply (field manager "pkgsync-install"): first the
CustomResourceDefinitions, waiting until each is Established, then the Namespace, the
ServiceAccount and RBAC, and the controller Deployment, running the image of this release
(--image to choose another). It then waits until the Deployment is Available (--wait=false to
return at once).

Objects already as this release wants them are not written. Running install again, or with a
newer binary, upgrades in place.

--verify-key checks the controller image's cosign signature before anything is applied or
printed and pins the Deployment to the digest that was verified; an unsigned image, a signature
by another key or an image changed since it was signed is refused and nothing is installed.
--verify-attestation slsaprovenance1 (or spdxjson) also requires the release's signed provenance
(or SBOM) attestation about that digest, by one of the same keys.

--export prints the manifests instead of applying them, for GitOps repositories or
"kubectl apply --server-side -f". Each object applied goes to stdout with what happened to it;
progress goes to stderr. -o json and -o yaml print the result once install ends, as one
document (also when it fails part way: the objects applied so far):
{"version":..,"image":..,"namespace":..,"dryRun":..,"objects":[{"object":..,"action":..,"note":..}]}.`,
		Example: `  pkgsync install
  pkgsync install --verify-key pkgsync-release.pub
  pkgsync install --image registry.example.com/platform/pkgsync:v0.1.0 --kubeconfig mgmt.kubeconfig
  pkgsync install --dry-run=server
  pkgsync install -o json
  pkgsync install --export > pkgsync.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := flags.output.check(); err != nil {
				return err
			}
			if flags.export && flags.dryRun.enabled() {
				return usageError("--export and --dry-run exclude each other: --export contacts no cluster")
			}
			if flags.export && flags.output.document() {
				return usageError("--export and -o %s exclude each other: --export prints the manifests as YAML, -o the result of an install", flags.output.format)
			}
			if err := cluster.validate(); err != nil {
				return err
			}
			stderr := cmd.ErrOrStderr()
			img := flags.image
			if img == "" {
				img = version.Image()
				if version.Version == version.Dev {
					fmt.Fprintf(stderr, "warning: this pkgsync is not a release build (version %s): no image %s is published; "+
						"pass --image\n", version.Version, img)
				}
			} else if _, err := source.ParseReference(img); err != nil {
				return usageError("--image: %w", err)
			}
			verify, err := flags.verifying()
			if err != nil {
				return err
			}
			if verify {
				pinned, err := flags.verifiedImage(cmd.Context(), stderr, img)
				if err != nil {
					return err
				}
				img = pinned
			}
			objs, err := config.Render(config.Options{Variant: flags.variant(), Namespace: cluster.namespace, Image: img})
			if err != nil {
				return err
			}
			sortForInstall(objs)
			return flags.install(cmd, cluster, objs, img)
		},
	}
	cluster.ApplyFlags(cmd.Flags())
	cmd.Flags().BoolVar(&cluster.wait, "wait", true, "Wait until the controller Deployment is Available")
	flags.ApplyFlags(cmd.Flags())
	return cmd
}

// install exports objs (--export), lists them (a client dry run) or applies them to the cluster,
// printing the result as -o asks.
func (o *installFlags) install(cmd *cobra.Command, cluster clusterFlags, objs []*unstructured.Unstructured, img string) error {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	report := &installReport{Version: version.Version, Image: img, Namespace: cluster.namespace, Objects: []objectResult{}}
	if o.dryRun.enabled() {
		report.DryRun = o.dryRun.mode
	}
	switch {
	case o.export:
		return writeManifests(stdout, objs, img)
	case o.dryRun.mode == dryRunClient:
		for _, obj := range objs {
			report.Objects = append(report.Objects, objectResult{Object: apply.RefOf(obj).String()})
			if !o.output.document() {
				fmt.Fprintf(stdout, "%s (dry run)\n", apply.RefOf(obj))
			}
		}
		fmt.Fprintf(stderr, "dry run: would install pkgsync %s with image %s in namespace %s; nothing was sent to a cluster\n",
			version.Version, img, cluster.namespace)
		if o.output.document() {
			return o.output.writeDocument(cmd, "the install result", report)
		}
		return nil
	}
	inst, err := newInstaller(cluster.kube, stdout, stderr)
	if err != nil {
		return err
	}
	inst.dryRun = o.dryRun.mode == dryRunServer
	inst.image = img
	inst.document = o.output.document()
	fmt.Fprintf(stderr, "installing pkgsync %s (config/%s) with image %s in namespace %s on %s\n",
		version.Version, o.variant(), img, cluster.namespace, inst.host)
	err = inst.install(cmd.Context(), objs, cluster)
	if inst.document && (err == nil || len(inst.results) > 0) {
		report.Objects = append(report.Objects, inst.results...)
		err = writeResult(cmd, o.output, "the install result", report, err)
	}
	return err
}

// installRank orders the kinds of an install: what others depend on first, the controller last.
var installRank = map[string]int{
	"Namespace":                0,
	"CustomResourceDefinition": 1,
	"ServiceAccount":           2,
	"ClusterRole":              3,
	"ClusterRoleBinding":       4,
	"Role":                     5,
	"RoleBinding":              6,
	"Deployment":               9,
}

// sortForInstall puts objs in install order (stable, so kustomize's order breaks ties).
func sortForInstall(objs []*unstructured.Unstructured) {
	rank := func(o *unstructured.Unstructured) int {
		if r, ok := installRank[o.GetKind()]; ok {
			return r
		}
		return 8
	}
	slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int { return rank(a) - rank(b) })
}

// writeManifests prints objs as one YAML stream, in install order.
func writeManifests(w io.Writer, objs []*unstructured.Unstructured, img string) error {
	if _, err := fmt.Fprintf(w, "# pkgsync %s: CRDs, RBAC and the controller (image %s).\n"+
		"# Generated by pkgsync install --export. Apply with: kubectl apply --server-side -f FILE\n", version.Version, img); err != nil {
		return err
	}
	for _, obj := range objs {
		data, err := yaml.Marshal(obj.Object)
		if err != nil {
			return fmt.Errorf("export %s: %w", apply.RefOf(obj), err)
		}
		if _, err := fmt.Fprintf(w, "---\n%s", data); err != nil {
			return err
		}
	}
	return nil
}

// install applies objs: CRDs first, until Established, then the rest; then waits for the
// controller Deployment, when asked.
func (i *installer) install(ctx context.Context, objs []*unstructured.Unstructured, cluster clusterFlags) error {
	waitCtx, cancel := context.WithTimeout(ctx, cluster.timeout)
	defer cancel()
	crds, rest := splitCRDs(objs)
	for _, obj := range crds {
		if err := i.apply(ctx, obj); err != nil {
			return err
		}
	}
	if !i.dryRun && len(crds) > 0 {
		fmt.Fprintf(i.stderr, "waiting for %d CustomResourceDefinitions to be Established\n", len(crds))
		for _, crd := range crds {
			if err := i.waitEstablished(waitCtx, crd, cluster.timeout); err != nil {
				return err
			}
		}
	}
	for _, obj := range rest {
		if err := i.apply(ctx, obj); err != nil {
			return err
		}
	}
	if i.dryRun {
		fmt.Fprintf(i.stderr, "dry run: %s; nothing was changed\n", i.counts)
		return nil
	}
	if cluster.wait {
		for _, obj := range rest {
			if obj.GetKind() == "Deployment" {
				fmt.Fprintf(i.stderr, "waiting for %s to be Available (--timeout %s)\n", apply.RefOf(obj), cluster.timeout)
				if err := i.waitAvailable(waitCtx, obj, cluster.timeout); err != nil {
					return err
				}
			}
		}
	}
	fmt.Fprintf(i.stderr, "pkgsync installed: %s\n", i.counts)
	return nil
}

// splitCRDs separates the CustomResourceDefinitions from the other objects, keeping the order.
func splitCRDs(objs []*unstructured.Unstructured) (crds, rest []*unstructured.Unstructured) {
	for _, obj := range objs {
		if obj.GroupVersionKind().GroupKind() == config.CRDGroupKind {
			crds = append(crds, obj)
		} else {
			rest = append(rest, obj)
		}
	}
	return crds, rest
}
