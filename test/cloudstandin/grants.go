package cloudstandin

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"time"
)

// grant is what a stand-in issued a token for: whom (a role, an identity, a service account)
// and until when.
type grant struct {
	role    string
	expires time.Time
}

// registryCounters count a registry front's decisions.
type registryCounters struct {
	// RegistryRefused counts requests whose credentials were refused (not the challenge of a
	// request without any); RegistryServed those let through.
	RegistryRefused, RegistryServed atomic.Int64
}

// decide is a registry front's decision on basic credentials: the challenge without a
// password; else the grant the password was issued with (found), for user, not expired, and
// whose repositories (path prefixes) hold repository ("" for the /v2/ ping). deny is the
// cloud's message for a repository refused.
func (c *registryCounters) decide(user, username, password, repository string, g *grant, found bool, repositories []string, deny string) (int, string) {
	switch {
	case password == "":
		return http.StatusUnauthorized, "authentication required"
	case !found || username != user:
		c.RegistryRefused.Add(1)
		return http.StatusUnauthorized, "the credentials are not a token this registry issued"
	case time.Now().After(g.expires):
		c.RegistryRefused.Add(1)
		return http.StatusUnauthorized, "the token has expired; authenticate again"
	case repository != "" && !allows(repositories, repository):
		c.RegistryRefused.Add(1)
		return http.StatusForbidden, fmt.Sprintf(deny, g.role, repository)
	}
	c.RegistryServed.Add(1)
	return http.StatusOK, ""
}
