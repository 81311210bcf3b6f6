package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/desired"
	fleets "pkgsync.dev/pkgsync/internal/fleet"
	"pkgsync.dev/pkgsync/internal/reconciler"
	"pkgsync.dev/pkgsync/source"
)

// Results of one member in `pkgsync fleet plan` (creates: the cluster has no member yet).
const (
	planMoves     = "moves"
	planCreates   = "creates"
	planUnchanged = "unchanged"
	planFails     = "fails"
)

// fleetPlanOutput is what `pkgsync fleet plan -o json` prints.
type fleetPlanOutput struct {
	Fleet    string `json:"fleet"`
	Revision string `json:"revision"`
	Image    string `json:"image"`
	// Partitions in rollout order, each with its members.
	Partitions []fleetPlanPartition `json:"partitions"`
	// Collisions are clusters that get no member (a Package the fleet does not own, or a
	// namespace two HostedClusters map to).
	Collisions []fleetMemberOutput `json:"collisions"`
	Fails      int                 `json:"fails"`
}

type fleetPlanPartition struct {
	Name    string                `json:"name"`
	Members []fleetPlanMemberLine `json:"members"`
}

type fleetPlanMemberLine struct {
	Namespace     string `json:"namespace"`
	HostedCluster string `json:"hostedCluster"`
	// From is the revision the member is on now, "" when it has no member yet.
	From string `json:"from"`
	// Result is moves, creates, unchanged or fails.
	Result  string `json:"result"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

type fleetPlanOptions struct {
	kube     *kubeFlags
	image    string
	output   *outputFlag
	registry registryOptions
}

func newFleetPlanCmd() *cobra.Command {
	o := &fleetPlanOptions{}
	cmd := &cobra.Command{
		Use:   "plan NAME [--image REF] [--kubeconfig FILE] [--context NAME] [-o table|wide|json|yaml]",
		Short: "Show which members of a HostedClusterPackage a revision would move and which would fail",
		Long: `Plan renders a candidate revision of the HostedClusterPackage NAME for every member's
environment, exactly as the member Package would render it (the HostedCluster's labels and
annotations, the fleet's config overrides, the template's labels and annotations), validates it,
and sends the management-cluster objects of each render to the API server as a server-side dry
run (dryRun=All, field manager pkgsync). It prints, partition by partition in rollout order,
which members would move and which would fail and why. It changes nothing.

The candidate is the fleet's target revision, or --image (a tag is resolved to a digest).
The package is pulled with the Docker config credentials (--registry-config), not the fleet's
pull Secret; --registry-host-overrides and --image-prefix-overrides should be the controller's.
Hosted-cluster phases are rendered and validated, not dry-run. A configuration key the
package's schema does not declare is dropped with a warning on stderr, once for the members it is
about.

-o json and -o yaml print the plan as a document; the table cuts messages at 200 characters,
-o wide prints them whole.

Exits 0 when no member would fail, 1 when one would, 3 when the plan could not be made (the
cluster or the registry cannot be reached, the fleet does not exist...), 2 on a wrong command
line: "kubectl diff"'s convention, as for "pkgsync diff".`,
		Example: `  pkgsync fleet plan hosted-addon
  pkgsync fleet plan hosted-addon --image registry.example.com/addons/hosted-addon:1.2.0
  pkgsync fleet plan hosted-addon -o json | jq '.partitions[].members[] | select(.result == "fails")'`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError("fleet plan takes one HostedClusterPackage name, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.output.check(); err != nil {
				return err
			}
			return comparisonExit(runFleetPlan(cmd, o, args[0]))
		},
	}
	fs := cmd.Flags()
	o.kube = newKubeFlags(fs, kubeconfigUsage)
	fs.StringVar(&o.image, "image", "", "Candidate image (tag or digest) instead of the fleet's target revision")
	o.output = addOutputFlag(fs, outputTable, outputWide)
	o.registry.ApplyFlags(fs)
	o.registry.overrides.ApplyFlags(fs)
	return cmd
}

func runFleetPlan(cmd *cobra.Command, o *fleetPlanOptions, name string) error {
	ctx := cmd.Context()
	cfg, err := o.kube.restConfig()
	if err != nil {
		return err
	}
	cfg.UserAgent = "pkgsync-fleet-plan"
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return fmt.Errorf("register the pkgsync API: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("connect to the management cluster %s: %w", cfg.Host, err)
	}
	fleet := &v1alpha1.HostedClusterPackage{}
	err = c.Get(ctx, client.ObjectKey{Name: name}, fleet)
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("HostedClusterPackage %q not found on %s: kubectl get hostedclusterpackages lists the fleets", name, cfg.Host)
	case apimeta.IsNoMatchError(err):
		return fmt.Errorf("the HostedClusterPackage API is not installed on %s (pkgsync install installs it): %w", cfg.Host, err)
	case err != nil:
		return fmt.Errorf("get HostedClusterPackage %q from %s: %w", name, cfg.Host, err)
	}

	image := o.image
	if image == "" {
		if fleet.Status.Target == nil {
			return fmt.Errorf("HostedClusterPackage %s has no target revision yet: pass --image", name)
		}
		image = fleet.Status.Target.Image
	}
	ref, err := source.ParseReference(image)
	if err != nil {
		return usageError("--image: %w", err)
	}
	src, err := o.registry.client(cmd.ErrOrStderr(), ref)
	if err != nil {
		return err
	}
	if ref.Digest == "" {
		digest, err := src.Resolve(ctx, ref, nil)
		if err != nil {
			return fmt.Errorf("resolve %s: %w", ref, err)
		}
		ref = ref.WithDigest(digest)
	}
	artifact, err := src.Pull(ctx, ref, nil)
	if err != nil {
		return fmt.Errorf("pull %s: %w", ref, err)
	}
	opts, err := managementEnvironment(ctx, &o.registry.overrides, cfg)
	if err != nil {
		return err
	}
	pre, err := fleets.PreflightFleet(ctx, c, opts, fleet, ref, artifact.FS, time.Now())
	if err != nil {
		return fmt.Errorf("preflight of HostedClusterPackage %s: %w", name, err)
	}
	printMemberWarnings(cmd.ErrOrStderr(), pre.Members)
	out := fleetPlanOf(ctx, c, fleet.Name, ref.String(), pre)
	if o.output.document() {
		err = o.output.writeDocument(cmd, "the plan of HostedClusterPackage "+name, out)
	} else {
		err = printFleetPlan(cmd.OutOrStdout(), out, o.output.format == outputWide)
	}
	if err != nil {
		return err
	}
	if out.Fails > 0 {
		return exitCodeError{code: 1, err: fmt.Errorf("revision %s would fail for %d member(s) of HostedClusterPackage %s", out.Revision, out.Fails, name)}
	}
	return nil
}

// managementEnvironment is what the controller knows of the management cluster for templates:
// its Kubernetes and OpenShift versions, its proxy, and the image overrides (the flags).
func managementEnvironment(ctx context.Context, o *overrideOptions, cfg *rest.Config) (reconciler.Options, error) {
	overrides, err := o.overrides()
	if err != nil {
		return reconciler.Options{}, err
	}
	opts := reconciler.Options{ImageOverrides: overrides}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return reconciler.Options{}, fmt.Errorf("read the Kubernetes version of %s: %w", cfg.Host, err)
	}
	v, err := dc.ServerVersion()
	if err != nil {
		return reconciler.Options{}, fmt.Errorf("read the Kubernetes version of %s: %w", cfg.Host, err)
	}
	opts.KubernetesVersion = v.GitVersion
	if opts.OpenShiftVersion, opts.Proxy, err = openShiftEnvironment(ctx, cfg); err != nil {
		return reconciler.Options{}, err
	}
	return opts, nil
}

// fleetPlanOf makes the output document: every member that renders has the management-cluster
// objects of its render dry-run.
func fleetPlanOf(ctx context.Context, c client.Client, fleet, image string, pre *fleets.Preflight) fleetPlanOutput {
	out := fleetPlanOutput{Fleet: fleet, Revision: pre.Revision, Image: image, Partitions: []fleetPlanPartition{}, Collisions: []fleetMemberOutput{}}
	byPartition := map[string][]fleetPlanMemberLine{}
	for _, m := range pre.Members {
		line := fleetPlanMemberLine{Namespace: m.Namespace, HostedCluster: m.HostedCluster, From: m.Revision, Reason: m.Reason, Message: m.Message}
		if m.Reason == "" {
			if err := dryRunManagement(ctx, c, m.Namespace, m.Result.Phases); err != nil {
				line.Reason, line.Message = "DryRunFailed", err.Error()
			}
		}
		switch {
		case line.Reason != "":
			line.Result = planFails
			out.Fails++
		case m.Revision == pre.Revision:
			line.Result = planUnchanged
		case m.Revision == "":
			line.Result = planCreates
		default:
			line.Result = planMoves
		}
		byPartition[m.Partition] = append(byPartition[m.Partition], line)
	}
	for _, p := range pre.Partitions {
		out.Partitions = append(out.Partitions, fleetPlanPartition{Name: p, Members: byPartition[p]})
	}
	for _, col := range pre.Collisions {
		out.Collisions = append(out.Collisions, fleetMemberOutput{Namespace: col.Namespace, Partition: col.Partition, Reason: col.Reason, Message: col.Message})
	}
	return out
}

// dryRunManagement sends the objects of the management-cluster phases as server-side applies
// with dryRun=All and pkgsync's field manager, without forcing ownership: the API server
// validates each (schema, admission, conflicts with other appliers) and stores nothing.
// Objects of a kind whose CRD the render itself installs cannot be dry-run before it is there:
// they are skipped. Every refusal is returned together.
func dryRunManagement(ctx context.Context, c client.Client, namespace string, phases []desired.Phase) error {
	installed := map[schema.GroupKind]bool{}
	for _, ph := range phases {
		for _, obj := range ph.Objects {
			if obj.GetKind() == "CustomResourceDefinition" {
				group, _, _ := unstructured.NestedString(obj.Object, "spec", "group")
				kind, _, _ := unstructured.NestedString(obj.Object, "spec", "names", "kind")
				installed[schema.GroupKind{Group: group, Kind: kind}] = true
			}
		}
	}
	var errs []error
	for _, ph := range phases {
		if ph.Class != "" {
			continue
		}
		for _, desiredObj := range ph.Objects {
			obj := desiredObj.DeepCopy()
			if installed[obj.GroupVersionKind().GroupKind()] {
				continue
			}
			namespaced, err := c.IsObjectNamespaced(obj)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", apply.RefOf(obj), err))
				continue
			}
			if !namespaced {
				obj.SetNamespace("")
			} else if obj.GetNamespace() == "" {
				obj.SetNamespace(namespace)
			}
			if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(apply.DefaultFieldManager), client.DryRunAll); err != nil {
				errs = append(errs, fmt.Errorf("phase %s: %s: %w", ph.Name, apply.RefOf(obj), err))
			}
		}
	}
	return errors.Join(errs...)
}

func printFleetPlan(w io.Writer, out fleetPlanOutput, wide bool) error {
	// A message is cut at 200 characters in the table; -o wide prints it whole.
	limit := 200
	if wide {
		limit = math.MaxInt
	}
	counts := map[string]int{}
	for _, p := range out.Partitions {
		for _, m := range p.Members {
			counts[m.Result]++
		}
	}
	fmt.Fprintf(w, "Fleet:     %s\n", out.Fleet)
	fmt.Fprintf(w, "Revision:  %s  %s\n", out.Revision, out.Image)
	fmt.Fprintf(w, "Members:   %d move, %d new, %d unchanged, %d fail, %d collision(s)\n\n",
		counts[planMoves], counts[planCreates], counts[planUnchanged], counts[planFails], len(out.Collisions))
	var table bytes.Buffer
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tNAMESPACE\tHOSTEDCLUSTER\tFROM\tRESULT\tREASON\tMESSAGE")
	for _, p := range out.Partitions {
		for _, m := range p.Members {
			from := m.From
			if from == "" {
				from = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", printable(planPartitionName(p.Name)), printable(m.Namespace), printable(m.HostedCluster),
				printable(from), m.Result, printable(m.Reason), oneLine(m.Message, limit))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// Empty last columns leave padding behind.
	for _, line := range strings.SplitAfter(table.String(), "\n") {
		if line != "" {
			fmt.Fprintln(w, strings.TrimRight(line, " \n"))
		}
	}
	if len(out.Collisions) > 0 {
		fmt.Fprintln(w, "\nCollisions (no member):")
		for _, col := range out.Collisions {
			fmt.Fprintf(w, "  %s  %s: %s\n", printable(col.Namespace), printable(col.Reason), oneLine(col.Message, limit))
		}
	}
	return nil
}

func planPartitionName(name string) string {
	if name == "" {
		return "(unlabelled)"
	}
	return name
}

// oneLine keeps a message, the package's or the cluster's text, on one line of at most n
// bytes: escaped (printable) before the table aligns its columns, so the escapes take the room
// they are shown in, runs of spaces collapsed, cut on a character boundary.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(printable(s)), " ")
	if len(s) > n {
		cut := n - 3
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}
