package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"pkgsync.dev/pkgsync/source"
)

// registryHints says, for each cause source reports, what a CLI user does about it. source
// reports the cause only; the flags are this command line's.
var registryHints = []struct {
	cause error
	hint  string
}{
	{source.ErrAuthenticationRequired, "log in with `docker login REGISTRY`, or pass --registry-config"},
	{source.ErrTLSVerification, "give the registry's CA with --ca-file; --insecure-skip-tls-verify skips verification"},
	{source.ErrHTTPSRequired, "give the registry's CA with --ca-file, which switches to HTTPS"},
	{source.ErrPlainHTTPAnswer, "use --plain-http for this registry"},
}

// withRegistryHint adds the CLI's hint to a registry error.
func withRegistryHint(err error) error {
	for _, h := range registryHints {
		if errors.Is(err, h.cause) {
			return fmt.Errorf("%w (%s)", err, h.hint)
		}
	}
	return err
}

// addRegistryHints makes every command of root add the hint to the registry errors it returns.
func addRegistryHints(root *cobra.Command) {
	for _, c := range root.Commands() {
		if run := c.RunE; run != nil {
			c.RunE = func(cmd *cobra.Command, args []string) error { return withRegistryHint(run(cmd, args)) }
		}
	}
}
