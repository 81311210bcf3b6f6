package cloudauth

import (
	fluxauth "github.com/fluxcd/pkg/auth"
	fluxaws "github.com/fluxcd/pkg/auth/aws"
	fluxazure "github.com/fluxcd/pkg/auth/azure"
	fluxgcp "github.com/fluxcd/pkg/auth/gcp"
)

// tokenSecrets returns the secrets a cloud token holds, to cut out of error texts.
func tokenSecrets(t fluxauth.Token) []string {
	switch t := t.(type) {
	case *fluxaws.Credentials:
		var out []string
		for _, s := range []*string{t.SecretAccessKey, t.SessionToken} {
			if s != nil {
				out = append(out, *s)
			}
		}
		return out
	case *fluxazure.Token:
		return []string{t.Token}
	case *fluxgcp.Token:
		return []string{t.AccessToken}
	}
	return nil
}
