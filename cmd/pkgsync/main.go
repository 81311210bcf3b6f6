// Command pkgsync is the one binary of pkgsync: the CLI that builds, pushes, renders and applies
// packages, and the controller that reconciles Package resources.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the root command with stdout and stderr and maps the outcome to an exit code:
// 0 success, 1 failure, 2 usage error.
func run(args []string, stdout, stderr io.Writer) int {
	cmd := newRootCmd()
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	// Ctrl-C and SIGTERM cancel the command's context: the controller shuts down cleanly and
	// the CLI stops waiting.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var code exitCodeError
	if errors.As(err, &code) {
		if code.err != nil {
			fmt.Fprintln(stderr, "Error:", printableText(code.err.Error()))
		}
		return code.code
	}
	fmt.Fprintln(stderr, "Error:", printableText(err.Error()))
	return 1
}

// exitCodeError carries a specific exit code out of a command, for commands such as validate
// whose failure is a normal, reported outcome.
type exitCodeError struct {
	code int
	err  error
}

func (e exitCodeError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit code %d", e.code)
	}
	return e.err.Error()
}

func (e exitCodeError) Unwrap() error { return e.err }

// usageError marks errors in the command line itself, which exit with code 2.
func usageError(format string, args ...any) error {
	return exitCodeError{code: 2, err: fmt.Errorf(format, args...)}
}
