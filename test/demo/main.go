package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

func main() {
	os.Exit(run())
}

// run returns the exit code: 0 when the story completed (and, with --keep, the user pressed
// Ctrl-C), 1 on a failure or the deadline, 130 when interrupted before the end.
func run() int {
	keepDefault, _ := strconv.ParseBool(os.Getenv("KEEP"))
	keep := flag.Bool("keep", keepDefault, "Leave everything running after the story until Ctrl-C (default from $KEEP)")
	timeout := flag.Duration("timeout", 3*time.Minute, "Give up when the story takes longer than this")
	bin := flag.String("pkgsync", "bin/pkgsync", "The pkgsync binary to run (built by `make build`)")
	flag.Parse()

	// Ctrl-C and SIGTERM (make forwards it) end the demo; the deferred cleanup stops every process.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	d := &demo{out: newNarrator(os.Stdout), keep: *keep, timeout: *timeout, pkgsyncBin: *bin}
	err := d.run(ctx)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errInterrupted):
		fmt.Fprintln(os.Stderr, "demo interrupted; everything it started is stopped")
		return 130
	default:
		fmt.Fprintf(os.Stderr, "\ndemo failed: %v\n", err)
		return 1
	}
}
