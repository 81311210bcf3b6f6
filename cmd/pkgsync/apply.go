package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/render"
)

// applyFlags are the flags of apply besides the render inputs.
type applyFlags struct {
	kube             *kubeFlags
	hostedKubeconfig string
	dryRun           *dryRunFlag
	wait             bool
	adopt            bool
	timeout          time.Duration
	interval         time.Duration
	output           *outputFlag
}

func (o *applyFlags) ApplyFlags(fs *pflag.FlagSet) {
	o.kube = newKubeFlags(fs, kubeconfigUsage)
	fs.StringVar(&o.hostedKubeconfig, "hosted-kubeconfig", "", "kubeconfig of the hosted cluster, for phases of class hosted-cluster")
	o.dryRun = addDryRunFlag(fs, true, `"server" sends every change as a server-side dry run and prints what would change; `+
		`"client" prints the objects that would be applied without contacting a cluster (--dry-run alone, deprecated: server)`)
	fs.BoolVar(&o.wait, "wait", false, "keep applying until every phase is available, or --timeout passes")
	fs.BoolVar(&o.adopt, "adopt", false, "take over objects that exist without this package's ownership labels")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "how long --wait waits for every phase to be available")
	fs.DurationVar(&o.interval, "interval", 2*time.Second, "pause between passes while waiting")
	o.output = addOutputFlag(fs, "text")
}

func newApplyCmd() *cobra.Command {
	var in renderInputs
	var flags applyFlags
	cmd := &cobra.Command{
		Use:   "apply DIR|REF [--kubeconfig FILE] [--context NAME]",
		Short: "Apply a package to clusters once, phase by phase",
		Long: `Render a package (a directory, or a registry reference that is pulled first) and apply it
with server-side apply, phase by phase: a phase starts only when every object of the previous
one is available. Phases of class hosted-cluster go to the cluster of --hosted-kubeconfig, the
others to the cluster of --kubeconfig.

Without --wait, apply makes one pass and reports where its phases stand; with --wait it repeats
passes until every phase is available. Objects are labelled as owned by the Package NAMESPACE/NAME
(--name, --namespace), the same labels the controller uses, so a Package with that name can take
over later. The CLI keeps no inventory: objects dropped from the package are not pruned; the
controller does that.

-n/--namespace defaults to the namespace of the kubeconfig context, as for kubectl ("default"
when the context sets none).

--dry-run=server sends every change as a server-side dry run: the API server checks it and
persists nothing. --dry-run=client contacts no cluster: it lists the objects of every phase as
rendered. --dry-run alone (and =true, =false), apply's former bool flag, is deprecated: it means
--dry-run=server (=none).

Progress goes to stderr; the objects changed (with --dry-run: that would change) go to stdout,
a line each as they change, or with -o json|yaml once the passes end, as one document:
{"dryRun":..,"complete":..,"changes":[{"object":..,"action":..}],
"phases":[{"name":..,"cluster":..,"state":..,"waiting":[{"object":..,"reason":..}]}]}.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runApplyCmd(cmd, &in, &flags, args[0])
		},
	}
	in.ApplyFlags(cmd.Flags())
	flags.ApplyFlags(cmd.Flags())
	return cmd
}

// runApplyCmd renders the package arg and applies it: once, until complete (--wait), as a
// server-side dry run, or, for a client dry run, lists what would be applied.
func runApplyCmd(cmd *cobra.Command, in *renderInputs, flags *applyFlags, arg string) error {
	flags.dryRun.warnDeprecated(cmd.ErrOrStderr())
	if err := flags.output.check(); err != nil {
		return err
	}
	if flags.wait && flags.dryRun.enabled() {
		return usageError("--wait and --dry-run exclude each other: a dry run changes nothing to wait for")
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	if err := flags.kube.defaultNamespace(cmd.Flags(), &in.namespace); err != nil {
		return err
	}
	fsys, opts, err := in.open(ctx, arg, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	rendered, err := renderPackage(ctx, cmd.ErrOrStderr(), fsys, opts)
	if err != nil {
		return fmt.Errorf("render %s: %w", arg, err)
	}
	var report *applyReport
	if flags.output.document() {
		report = newApplyReport(flags.dryRun.mode)
	}
	if flags.dryRun.mode == dryRunClient {
		if report != nil {
			report.addClientDryRun(rendered)
			printClientDryRun(io.Discard, cmd.ErrOrStderr(), rendered, opts.Namespace)
			return flags.output.writeDocument(cmd, "the apply result", report)
		}
		printClientDryRun(cmd.OutOrStdout(), cmd.ErrOrStderr(), rendered, opts.Namespace)
		return nil
	}
	targets, err := flags.targets()
	if err != nil {
		return err
	}
	name := opts.Name
	if name == "" && rendered.Manifest != nil {
		name = rendered.Manifest.Name
	}
	req := apply.Request{
		Owner:   apply.Owner{Kind: "Package", Namespace: opts.Namespace, Name: name},
		Phases:  rendered.Phases,
		Targets: targets,
		DryRun:  flags.dryRun.mode == dryRunServer,
		// Namespaced objects without a namespace go to the Package's namespace.
		DefaultNamespace: opts.Namespace,
	}
	if rendered.Manifest != nil {
		req.Probes = rendered.Manifest.Spec.AvailabilityProbes
	}
	if flags.adopt {
		req.Adopt = v1alpha1.AdoptAlways
	}
	err = runApply(ctx, apply.NewEngine(apply.Options{}), req, *flags, report, cmd.OutOrStdout(), cmd.ErrOrStderr())
	if report != nil && len(report.Phases) > 0 {
		// Where the passes got to is the result, also when they failed (the error on stderr).
		if werr := flags.output.writeDocument(cmd, "the apply result", report); werr != nil && err == nil {
			err = werr
		}
	}
	return err
}

// printClientDryRun lists the objects of every phase as rendered: a client dry run sends
// nothing, so it cannot tell which kinds are namespaced; it says where those without a
// namespace go.
func printClientDryRun(stdout, stderr io.Writer, rendered *render.Result, namespace string) {
	for _, p := range rendered.Phases {
		for _, obj := range p.Objects {
			fmt.Fprintf(stdout, "%s (dry run)\n", apply.RefOf(obj))
		}
	}
	fmt.Fprintf(stderr, "dry run: nothing was sent to a cluster; namespaced objects without a namespace go to namespace %s\n", namespace)
}

// targets builds a client per cluster: the management cluster of the cluster flags (--kubeconfig,
// --context, $KUBECONFIG), and the hosted cluster of --hosted-kubeconfig when given. The CLI reads
// credentials from the user's kubeconfig; the controller finds them in the cluster.
func (o *applyFlags) targets() (map[string]apply.Target, error) {
	cfg, err := o.kube.restConfig()
	if err != nil {
		return nil, fmt.Errorf("the management cluster: %w", err)
	}
	configs := map[string]*rest.Config{"": cfg}
	if o.hostedKubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", o.hostedKubeconfig)
		if err != nil {
			return nil, fmt.Errorf("load kubeconfig %s of the hosted cluster: %w", o.hostedKubeconfig, err)
		}
		configs[v1alpha1.ClassHostedCluster] = cfg
	}
	targets := map[string]apply.Target{}
	for class, cfg := range configs {
		name := "management cluster"
		if class == v1alpha1.ClassHostedCluster {
			name = "hosted cluster"
		}
		c, err := client.New(cfg, client.Options{})
		if err != nil {
			return nil, fmt.Errorf("connect to the %s (%s): %w", name, cfg.Host, err)
		}
		targets[class] = apply.Target{Client: c, Name: name}
	}
	return targets, nil
}

// runApply makes passes until every phase is complete (or once, without --wait), printing
// progress, and the changes on stdout or, with a report, into it.
func runApply(ctx context.Context, engine *apply.Engine, req apply.Request, flags applyFlags, report *applyReport, stdout, stderr io.Writer) error {
	if flags.wait {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, flags.timeout)
		defer cancel()
	}
	lastProgress := ""
	// lastSummary is where the last whole pass stood: a pass cut short by the timeout knows less.
	lastSummary := ""
	for {
		res, err := engine.Apply(ctx, req)
		if err == nil && res != nil {
			lastSummary = res.Summary()
		}
		if res != nil {
			req.Previous = res.Inventory
			if report != nil {
				report.add(res, flags.dryRun.enabled())
			} else {
				printChanges(stdout, res, flags.dryRun.enabled())
			}
			if p := progress(res); p != lastProgress {
				fmt.Fprint(stderr, p)
				lastProgress = p
			}
		}
		var unavailable *apply.TargetUnavailableError
		if errors.As(err, &unavailable) && errors.Is(err, apply.ErrNoTarget) && unavailable.Class == v1alpha1.ClassHostedCluster {
			return fmt.Errorf("%w: pass --hosted-kubeconfig for phases of class %s", err, v1alpha1.ClassHostedCluster)
		}
		// A pass that fails as the timeout ends (a request cut off, or refused by the client's
		// rate limiter because it would end after the deadline) ends the wait: report where the
		// last whole pass stood, not the requests cut short.
		if err != nil && flags.wait && res != nil && timeoutEnding(ctx, flags.interval) {
			if lastSummary == "" {
				lastSummary = res.Summary()
			}
			return fmt.Errorf("phases not complete after %s: %s", flags.timeout, lastSummary)
		}
		if err != nil {
			return err
		}
		switch {
		case flags.dryRun.enabled():
			fmt.Fprintln(stderr, "dry run: nothing was changed")
			return nil
		case res.Complete():
			fmt.Fprintf(stderr, "every phase complete: %d created, %d configured, %d unchanged\n", res.Created, res.Updated, res.Unchanged)
			return nil
		case !flags.wait:
			fmt.Fprintln(stderr, "phases in progress; run again or pass --wait")
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("phases not complete after %s: %s", flags.timeout, res.Summary())
		case <-time.After(flags.interval):
		}
	}
}

// printChanges lists the objects a pass created or changed.
func printChanges(w io.Writer, res *apply.Result, dryRun bool) {
	suffix := ""
	if dryRun {
		suffix = " (dry run)"
	}
	for _, c := range res.Changes {
		if c.Action != apply.ActionUnchanged || dryRun {
			fmt.Fprintf(w, "%s %s%s\n", c.Ref, c.Action, suffix)
		}
	}
}

// progress describes every phase: its cluster, state and the objects not yet available.
func progress(res *apply.Result) string {
	out := ""
	for i, p := range res.Phases {
		target := p.Target
		if target == "" {
			target = "management cluster"
			if p.Class == v1alpha1.ClassHostedCluster {
				target = "hosted cluster"
			}
		}
		out += fmt.Sprintf("phase %d/%d %s (%s): %s\n", i+1, len(res.Phases), p.Name, target, p.State)
		for _, s := range p.NotAvailable {
			out += "  waiting for " + s.String() + "\n"
		}
	}
	return out
}

// timeoutEnding reports whether ctx has ended, or ends before another pass could start.
func timeoutEnding(ctx context.Context, interval time.Duration) bool {
	if ctx.Err() != nil {
		return true
	}
	deadline, ok := ctx.Deadline()
	return ok && time.Until(deadline) < interval
}
