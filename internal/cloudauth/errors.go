package cloudauth

import (
	"errors"
	"fmt"
	"strings"
)

// Step names the exchange of the chain that failed.
type Step string

const (
	// StepServiceAccount reads the ServiceAccount whose identity is exchanged.
	StepServiceAccount Step = "ServiceAccount"
	// StepTokenRequest asks the Kubernetes API for the ServiceAccount's token (TokenRequest).
	StepTokenRequest Step = "token request"
	// StepRoleAssumption exchanges the ServiceAccount's token for the cloud identity's: AWS STS
	// AssumeRoleWithWebIdentity, the Azure AD federated credential, GCP's STS token exchange.
	StepRoleAssumption Step = "role assumption"
	// StepControllerIdentity obtains the process's own cloud credentials (the controller pod's
	// workload identity, the CLI's machine credentials).
	StepControllerIdentity Step = "own identity"
	// StepRegistryToken exchanges the cloud credentials for the registry's (ECR
	// GetAuthorizationToken, ACR /oauth2/exchange, an Artifact Registry access token).
	StepRegistryToken Step = "registry token"
)

// Error is a failed exchange: which one, for whom, and what to do about it. Its text never holds
// a token: the tokens of the exchange are cut out of the errors it wraps.
type Error struct {
	Provider string
	// Identity is "ServiceAccount NS/NAME", "the controller's own identity" or "this machine's
	// credentials".
	Identity string
	Registry string
	Step     Step
	Err      error
	// Hint says how to fix it.
	Hint string
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("%s registry credentials for %s as %s: %s failed: %v", e.Provider, e.Registry, e.Identity, e.Step, e.Err)
	if e.Hint != "" {
		msg += " (" + e.Hint + ")"
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// redacted is an error whose text has the given secrets cut out.
type redacted struct {
	msg string
	err error
}

func (r *redacted) Error() string { return r.msg }
func (r *redacted) Unwrap() error { return r.err }

// redact returns err with every secret of secrets replaced in its text. The SDKs' errors name
// operations and the service's message, not tokens; this holds whatever a stand-in or a proxy
// echoes back.
func redact(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	changed := false
	for _, s := range secrets {
		if len(s) >= 8 && strings.Contains(msg, s) {
			msg = strings.ReplaceAll(msg, s, "[redacted]")
			changed = true
		}
	}
	if !changed {
		return err
	}
	return &redacted{msg: msg, err: errors.Unwrap(err)}
}
