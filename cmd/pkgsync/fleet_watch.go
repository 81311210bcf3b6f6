package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// Bounds of the watch frame.
const (
	// watchDefaultWidth is the width drawn for when the terminal does not tell its own.
	watchDefaultWidth = 100
	// watchMinWidth is the narrowest frame drawn: narrower terminals wrap.
	watchMinWidth = 40
	// watchInFlight is how many members in flight the frame lists; the rest are counted.
	watchInFlight = 10
	// watchTick is how often a terminal frame is drawn again without a change, for the
	// countdowns: drawing reads the watch's cache, not the API server.
	watchTick = time.Second
)

// fleetWatchOutput is where --watch draws: the writer, and for a terminal its width.
type fleetWatchOutput struct {
	w io.Writer
	// width is nil when the output is not a terminal: then a line is printed per change.
	width func() int
}

// watchOutputOf draws on w in place when it is a terminal, else in lines.
func watchOutputOf(w io.Writer) fleetWatchOutput {
	f, ok := terminalOf(w)
	if !ok {
		return fleetWatchOutput{w: w}
	}
	fd := int(f.Fd()) //nolint:gosec // a file descriptor fits an int
	// The frame is drawn with control sequences of pkgsync's own, so it goes to the terminal
	// itself; inPlace passes the frame's text through the filter first.
	return fleetWatchOutput{w: f, width: func() int {
		if width, _, err := term.GetSize(fd); err == nil && width > 0 {
			return width
		}
		return watchDefaultWidth
	}}
}

// watchFleet follows the fleet name and its members until the command's context ends.
func watchFleet(cmd *cobra.Command, kube *kubeFlags, name string) error {
	// Before the watch, whose informers would retry for ever: a fleet that does not exist is
	// the error fleet status gives, and members that may not be listed are an error too.
	c, cfg, err := fleetClient(kube)
	if err != nil {
		return err
	}
	if err := fleetGetError(c.Get(cmd.Context(), client.ObjectKey{Name: name}, &v1alpha1.HostedClusterPackage{}), name, cfg.Host); err != nil {
		return err
	}
	if err := c.List(cmd.Context(), &v1alpha1.PackageList{}, client.MatchingLabels{v1alpha1.FleetLabel: name}, client.Limit(1)); err != nil {
		return fmt.Errorf("list the member Packages of HostedClusterPackage %q on %s: %w", name, cfg.Host, err)
	}
	if err := followFleetOn(cmd.Context(), cfg, c.Scheme(), name, watchOutputOf(cmd.OutOrStdout())); err != nil {
		return fmt.Errorf("watch HostedClusterPackage %q on %s: %w", name, cfg.Host, err)
	}
	return nil
}

// followFleetOn follows the fleet name on the cluster of cfg, drawing on out, until ctx ends.
func followFleetOn(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, name string, out fleetWatchOutput) error {
	// One list and one watch per kind, narrowed by the API server to this fleet and its
	// members: nothing else of the cluster is read, and nothing is read again on a timer.
	cache, err := crcache.New(cfg, crcache.Options{Scheme: scheme, ByObject: map[client.Object]crcache.ByObject{
		&v1alpha1.HostedClusterPackage{}: {Field: fields.OneTermEqualSelector("metadata.name", name)},
		&v1alpha1.Package{}:              {Label: labels.SelectorFromSet(labels.Set{v1alpha1.FleetLabel: name})},
	}})
	if err != nil {
		return err
	}
	return followFleet(ctx, cache, name, out)
}

// errFleetGone ends a watch whose fleet was deleted.
var errFleetGone = errors.New("the fleet was deleted")

// followFleet draws the fleet from cache each time the watch reports a change of it or of a
// member, and on a terminal each watchTick, until ctx ends (nil) or the fleet is deleted.
func followFleet(ctx context.Context, cache crcache.Cache, name string, out fleetWatchOutput) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	changed := make(chan struct{}, 1)
	notify := func() {
		select {
		case changed <- struct{}{}:
		default: // a draw is due already; it reads the latest state
		}
	}
	handler := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify() },
		UpdateFunc: func(any, any) { notify() },
		DeleteFunc: func(any) { notify() },
	}
	for _, obj := range []client.Object{&v1alpha1.HostedClusterPackage{}, &v1alpha1.Package{}} {
		inf, err := cache.GetInformer(ctx, obj)
		if err != nil {
			return err
		}
		if _, err := inf.AddEventHandler(handler); err != nil {
			return err
		}
	}
	started := make(chan error, 1)
	go func() { started <- cache.Start(ctx) }()
	if !cache.WaitForCacheSync(ctx) {
		// It waits until the caches are synced or ctx ends.
		return nil
	}

	var tick <-chan time.Time
	if out.width != nil {
		t := time.NewTicker(watchTick)
		defer t.Stop()
		tick = t.C
		fmt.Fprint(out.w, "\x1b[H\x1b[2J")
		defer fmt.Fprintln(out.w)
	}
	printed := map[string]string{}
	draw := func() error {
		fleet := &v1alpha1.HostedClusterPackage{}
		err := cache.Get(ctx, client.ObjectKey{Name: name}, fleet)
		if apierrors.IsNotFound(err) {
			fmt.Fprintf(out.w, "HostedClusterPackage %s was deleted\n", printable(name))
			return errFleetGone
		}
		if err != nil {
			return err
		}
		list := &v1alpha1.PackageList{}
		if err := cache.List(ctx, list); err != nil {
			return err
		}
		now := time.Now()
		if out.width != nil {
			_, err := io.WriteString(out.w, inPlace(renderFleetFrame(fleet, list.Items, now, out.width())))
			return err
		}
		return printChangedLines(out.w, printed, renderFleetLines(fleet, list.Items))
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-started:
			if ctx.Err() != nil {
				return nil
			}
			return err
		case <-changed:
		case <-tick:
		}
		if err := draw(); errors.Is(err, errFleetGone) {
			return nil
		} else if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// inPlace turns a frame into what redraws it over the last one: the cursor goes home, each
// line clears what is left of the line before it, and the rest of the screen is cleared. The
// frame's text goes through printableText before these sequences are added: whatever field of
// the cluster's objects it shows, only pkgsync's own sequences reach the terminal.
func inPlace(frame string) string {
	var b strings.Builder
	b.WriteString("\x1b[H")
	for line := range strings.Lines(printableText(frame)) {
		b.WriteString(strings.TrimSuffix(line, "\n"))
		b.WriteString("\x1b[K\n")
	}
	b.WriteString("\x1b[J")
	return b.String()
}

// watchLine is one line of the plain rendering, with what it is about: a line is printed
// again only when its text changes.
type watchLine struct {
	key, text string
}

// printChangedLines prints the lines whose text changed since printed recorded them, and a line
// for each member that was printed and is gone.
func printChangedLines(w io.Writer, printed map[string]string, lines []watchLine) error {
	seen := make(map[string]bool, len(lines))
	for _, l := range lines {
		seen[l.key] = true
		if printed[l.key] == l.text {
			continue
		}
		printed[l.key] = l.text
		if _, err := fmt.Fprintln(w, l.text); err != nil {
			return err
		}
	}
	var gone []string
	for key := range printed {
		if !seen[key] {
			gone = append(gone, key)
		}
	}
	slices.Sort(gone)
	for _, key := range gone {
		delete(printed, key)
		if what, ok := strings.CutPrefix(key, "member "); ok {
			if _, err := fmt.Fprintf(w, "member %s: removed\n", what); err != nil {
				return err
			}
		}
	}
	return nil
}
