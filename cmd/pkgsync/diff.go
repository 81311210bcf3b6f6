package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/internal/packages"
	"pkgsync.dev/pkgsync/render"
	"pkgsync.dev/pkgsync/source"
)

// diffExitError is the exit code of a command that compares (diff, fleet plan) when it could not
// run. kubectl diff exits 0 for no differences, 1 for differences and >1 when kubectl or diff
// failed; pkgsync keeps that, with 2 already a wrong command line for every command, so 3.
const diffExitError = 3

// comparisonExit maps the outcome of a comparing command to its exit code: err as it is when it
// already carries one (1: differences, 2: a wrong command line), else diffExitError.
func comparisonExit(err error) error {
	var code exitCodeError
	if err == nil || errors.As(err, &code) {
		return err
	}
	return exitCodeError{code: diffExitError, err: err}
}

func newDiffCmd() *cobra.Command {
	var in renderInputs
	var flags applyFlags
	cmd := &cobra.Command{
		Use:   "diff DIR|REF [--kubeconfig FILE] [--context NAME] | diff package NAME [-n NAMESPACE]",
		Short: "Show what applying a package, or reconciling a Package, would change",
		Long: `Diff renders a package as the controller does and shows, object by object, what a reconcile
would change in the cluster, as a unified diff of the live object against the object a
server-side dry-run apply returns (pkgsync's field manager, ownership labels and conflict rules,
as "pkgsync apply" and the controller apply). Nothing is written.

"diff DIR|REF" renders a package directory or image with the render flags (--config, --name,
-n...); "diff package NAME [-n NAMESPACE]" renders the Package NAME of the cluster of --kubeconfig
exactly as the controller does: its image's tag resolved to a digest, its labels, annotations
and component, spec.config merged over what spec.configFrom reads, and the environment templates
see (the cluster's Kubernetes and OpenShift versions and proxy, the HostedCluster behind the
namespace, and the image overrides of --registry-host-overrides and --image-prefix-overrides,
which should be the controller's). The image is pulled with this machine's registry credentials,
not the Package's pull secret, and the ConfigMaps and Secrets of spec.configFrom are read as the
user of --kubeconfig, not the Package's ServiceAccount. Values of those Secrets are removed from
error messages; an object the package renders from them is shown as rendered (masked when it
is a Secret, printed when it is, say, a ConfigMap).

Server-set fields (managedFields, resourceVersion, generation, uid, creationTimestamp) and
status are left out of the diff, and the values of a Secret's data and stringData are never
printed: a changed value shows as "*** (changed)". A new object is shown against an empty one.
Phases of class hosted-cluster are compared with the cluster of --hosted-kubeconfig; without it
they are listed as skipped. Objects the package no longer holds (which the controller prunes)
are not shown: the CLI keeps no inventory. -n/--namespace defaults to the namespace of the
kubeconfig context, as for kubectl ("default" when the context sets none). A configuration key
the package's schema does not declare is dropped with a warning on stderr, as render says it.

Exit code: 0 when nothing would change, 1 when something would, 3 when the diff failed (2 for a
wrong command line), like "kubectl diff".`,
		Example: `  pkgsync diff ./my-package --config values.yaml -n team --kubeconfig ~/.kube/config
  pkgsync diff package my-package -n team --kubeconfig ~/.kube/config`,
		Args: func(_ *cobra.Command, args []string) error {
			switch {
			case len(args) == 1, len(args) == 2 && args[0] == "package":
				return nil
			}
			return usageError(`diff takes a package directory or image, or "package NAME", got %d arguments`, len(args))
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			changed, err := runDiff(cmd, &in, flags, args)
			if err != nil {
				// An error with differences found is an error still, as for kubectl diff.
				var code exitCodeError
				if errors.As(err, &code) && code.code == 2 {
					return err
				}
				return exitCodeError{code: diffExitError, err: err}
			}
			if changed {
				return exitCodeError{code: 1}
			}
			return nil
		},
	}
	in.ApplyFlags(cmd.Flags())
	flags.kube = newKubeFlags(cmd.Flags(), kubeconfigUsage)
	cmd.Flags().StringVar(&flags.hostedKubeconfig, "hosted-kubeconfig", "", "kubeconfig of the hosted cluster, for phases of class hosted-cluster (without it they are skipped)")
	return cmd
}

// runDiff renders, previews and prints the differences; it reports whether there are any.
func runDiff(cmd *cobra.Command, in *renderInputs, flags applyFlags, args []string) (bool, error) {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	if err := flags.kube.defaultNamespace(cmd.Flags(), &in.namespace); err != nil {
		return false, err
	}
	targets, err := flags.targets()
	if err != nil {
		return false, err
	}
	var rendered *render.Result
	var owner apply.Owner
	var adopt v1alpha1.AdoptionPolicy
	redact := func(err error) error { return err }
	if len(args) == 2 {
		pkg, err := renderClusterPackage(ctx, cmd.ErrOrStderr(), in, flags.kube, args[1])
		if err != nil {
			return false, err
		}
		rendered, redact = pkg.Result, pkg.Redact
		printWarnings(cmd.ErrOrStderr(), "", rendered.Warnings)
		owner = apply.Owner{Kind: "Package", Namespace: in.namespace, Name: args[1]}
		adopt = pkg.adopt
	} else {
		fsys, opts, err := in.open(ctx, args[0], cmd.ErrOrStderr())
		if err != nil {
			return false, err
		}
		if rendered, err = renderPackage(ctx, cmd.ErrOrStderr(), fsys, opts); err != nil {
			return false, fmt.Errorf("render %s: %w", args[0], err)
		}
		name := opts.Name
		if name == "" && rendered.Manifest != nil {
			name = rendered.Manifest.Name
		}
		owner = apply.Owner{Kind: "Package", Namespace: opts.Namespace, Name: name}
	}
	req := apply.Request{
		Owner:            owner,
		Phases:           rendered.Phases,
		Targets:          targets,
		DefaultNamespace: owner.Namespace,
		Adopt:            adopt,
	}
	phases, err := apply.NewEngine(apply.Options{}).Preview(ctx, req)
	if err != nil {
		return false, redact(err)
	}
	// The API server's answer may quote a value rendered from a configFrom Secret.
	for i := range phases {
		for j := range phases[i].Objects {
			phases[i].Objects[j].Err = redact(phases[i].Objects[j].Err)
		}
	}
	return printDiff(cmd.OutOrStdout(), cmd.ErrOrStderr(), phases)
}

// clusterPackage is a Package of the cluster rendered as the controller renders it.
type clusterPackage struct {
	*packages.RenderedPackage
	adopt v1alpha1.AdoptionPolicy
}

// renderClusterPackage reads the Package name of in.namespace and renders it as the controller
// does (controller.RenderPackage): its tag resolved to a digest (with spec.semver, the tag the
// controller chose last), the management cluster's environment read as the controller reads it
// at start-up, the HostedCluster behind the namespace, spec.configFrom merged. The image is
// pulled, and the ConfigMaps and Secrets of spec.configFrom are read, with this machine's
// credentials (registry and kubeconfig), not the Package's pull Secret or ServiceAccount.
func renderClusterPackage(ctx context.Context, stderr io.Writer, in *renderInputs, kube *kubeFlags, name string) (*clusterPackage, error) {
	if in.configFile != "" || in.name != "" || in.component != "" || in.kubernetesVersion != "" || in.openShiftVersion != "" || in.hostedCluster != "" {
		return nil, usageError("diff package renders as the controller does: the configuration, name and component come from the Package, the versions and HostedCluster from the cluster, not from --config, --name, --component, --kubernetes-version, --openshift-version or --hosted-cluster")
	}
	cfg, err := kube.restConfig()
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("connect to the management cluster (%s): %w", cfg.Host, err)
	}
	var pkg v1alpha1.Package
	if err := c.Get(ctx, client.ObjectKey{Namespace: in.namespace, Name: name}, &pkg); err != nil {
		return nil, fmt.Errorf("get Package %s/%s: %w", in.namespace, name, err)
	}
	image := pkg.Spec.Image
	if pkg.Spec.Semver != "" && pkg.Status.LastAttemptedTag != "" {
		image += ":" + pkg.Status.LastAttemptedTag // the tag the controller chose in the range
	}
	ref, err := source.ParseReference(image)
	if err != nil {
		return nil, fmt.Errorf("spec.image of Package %s/%s: %w", in.namespace, name, err)
	}
	src, err := in.registry.client(stderr, ref)
	if err != nil {
		return nil, err
	}
	if ref.Digest == "" {
		digest, err := src.Resolve(ctx, ref, nil)
		if err != nil {
			return nil, fmt.Errorf("resolve %s: %w", ref, err)
		}
		ref = ref.WithDigest(digest)
	}
	artifact, err := src.Pull(ctx, ref, nil)
	if err != nil {
		return nil, fmt.Errorf("pull %s: %w", ref, err)
	}
	opts, err := managementEnvironment(ctx, &in.registry.overrides, cfg)
	if err != nil {
		return nil, err
	}
	rendered, err := packages.RenderPackage(ctx, c, opts, &pkg, ref, artifact.FS)
	if err != nil {
		return nil, fmt.Errorf("render Package %s/%s: %w", in.namespace, name, err)
	}
	return &clusterPackage{RenderedPackage: rendered, adopt: pkg.Spec.AdoptionPolicy}, nil
}

// printDiff writes a unified diff per changed object and lists skipped phases and objects that
// could not be compared on stderr.
func printDiff(stdout, stderr io.Writer, phases []apply.PhasePreview) (bool, error) {
	changed := false
	var failed []string
	for _, ph := range phases {
		if ph.Skipped {
			fmt.Fprintf(stderr, "phase %s (class %s) skipped: no cluster given (--hosted-kubeconfig)\n", ph.Name, ph.Class)
			continue
		}
		for _, o := range ph.Objects {
			if o.Err != nil {
				failed = append(failed, o.Err.Error())
				continue
			}
			before, after := comparable(o.Live), comparable(o.Applied)
			maskSecret(before, after)
			if o.Live != nil && reflect.DeepEqual(before, after) {
				continue
			}
			changed = true
			a, err := toYAML(before)
			if err != nil {
				return changed, err
			}
			b, err := toYAML(after)
			if err != nil {
				return changed, err
			}
			path := diffPath(o.Ref)
			text, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
				A: difflib.SplitLines(a), B: difflib.SplitLines(b),
				FromFile: "live/" + path, ToFile: "merged/" + path, Context: 3,
			})
			if err != nil {
				return changed, err
			}
			fmt.Fprintf(stdout, "diff -u -N live/%s merged/%s\n", path, path)
			if o.Unchecked != "" {
				fmt.Fprintf(stdout, "# not checked by the API server: %s\n", o.Unchecked)
			}
			fmt.Fprint(stdout, text)
		}
	}
	if len(failed) > 0 {
		return changed, fmt.Errorf("%d objects would not be applied: %s", len(failed), strings.Join(failed, "; "))
	}
	return changed, nil
}

// diffPath names an object as kubectl diff does: GROUP.VERSION.KIND.NAMESPACE.NAME.
func diffPath(ref apply.ObjectRef) string {
	parts := []string{ref.Group, ref.Version, ref.Kind}
	if ref.Namespace != "" {
		parts = append(parts, ref.Namespace)
	}
	parts = append(parts, ref.Name)
	if ref.Group == "" {
		parts = parts[1:]
	}
	return strings.Join(parts, ".")
}

// comparable copies an object without what the server sets and a reconcile does not change.
func comparable(obj *unstructured.Unstructured) map[string]any {
	if obj == nil {
		return nil
	}
	c := obj.DeepCopy().Object
	delete(c, "status")
	for _, f := range []string{"managedFields", "resourceVersion", "generation", "uid", "creationTimestamp"} {
		unstructured.RemoveNestedField(c, "metadata", f)
	}
	return c
}

// maskSecret replaces a Secret's values on both sides: "***" where they are equal, and on the
// side after the apply "*** (changed)" where they differ, so no value is printed.
func maskSecret(before, after map[string]any) {
	isSecret := func(o map[string]any) bool { return o != nil && o["kind"] == "Secret" && o["apiVersion"] == "v1" }
	if !isSecret(before) && !isSecret(after) {
		return
	}
	// The desired-state hash covers the values: a guessable value could be confirmed with it.
	for _, o := range []map[string]any{before, after} {
		if h, ok, _ := unstructured.NestedString(o, "metadata", "annotations", apply.DesiredHashAnnotation); ok && h != "" {
			_ = unstructured.SetNestedField(o, "***", "metadata", "annotations", apply.DesiredHashAnnotation)
		}
	}
	for _, field := range []string{"data", "stringData"} {
		b, _, _ := unstructured.NestedMap(before, field)
		a, _, _ := unstructured.NestedMap(after, field)
		mask := func(obj, values, other map[string]any, changedMark string) {
			if obj == nil || values == nil {
				return
			}
			masked := map[string]any{}
			for k, v := range values {
				masked[k] = "***"
				if ov, ok := other[k]; !ok || !reflect.DeepEqual(ov, v) {
					masked[k] = "***" + changedMark
				}
			}
			obj[field] = masked
		}
		mask(before, b, a, "")
		mask(after, a, b, " (changed)")
	}
}

func toYAML(obj map[string]any) (string, error) {
	if obj == nil {
		return "", nil
	}
	data, err := yaml.Marshal(obj)
	return string(data), err
}
