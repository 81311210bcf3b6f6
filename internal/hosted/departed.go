package hosted

import (
	"time"

	"pkgsync.dev/pkgsync/apply"
)

// departedEntry is the last client of a namespace whose connector Secret is gone, and when it
// went. server, serverField and secretCreated are the entry's: Departed checks the server
// against the HostedCluster on every use, as Target does, and serves the client only in the
// namespace the Secret was created in, not in a namespace of the same name created since.
type departedEntry struct {
	target              apply.Target
	server, serverField string
	secretCreated       time.Time
	at                  time.Time
}

// DepartedTTL is how long Departed keeps the client of a namespace whose connector Secret was
// deleted: the time a namespace's deletion takes to reach its resources' teardown.
const DepartedTTL = 2 * time.Minute

// depart drops the client of a namespace whose connector Secret is gone, keeping it for
// Departed when its API server last answered.
func (c *Clients) depart(namespace string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[namespace]; ok && e.health.state == HealthClosed {
		c.departed[namespace] = departedEntry{target: e.target, server: e.server, serverField: e.serverField,
			secretCreated: e.secretCreated, at: c.now()}
	}
	delete(c.entries, namespace)
}

// Departed returns, for at most DepartedTTL after its connector Secret was deleted, the last
// client of a namespace whose hosted API server answered then. It is for one caller only: the
// teardown of resources in that namespace while the namespace is being deleted. Kubernetes'
// namespace controller deletes the connector Secret with everything else, at once, while those
// resources wait on their finalizers; without the client their hosted objects could only be
// let go, though the hosted API server still answers.
//
// It is served only as Target would have served it, and only to resources that could have read
// the Secret: namespaceCreated is the creation time of the namespace the caller's resource is
// in, and a Secret created before it was another namespace's of the same name (one deleted
// since: every object of a namespace is created after it); zero (the namespace was not found)
// serves nothing. hc is the HostedCluster behind the namespace now, whose advertised endpoint
// the server is checked against (checkServer). A new connector Secret, with credentials or
// without, or a failure of the client (MarkUnavailable) ends it.
func (c *Clients) Departed(namespace string, namespaceCreated time.Time, hc *HostedCluster) (apply.Target, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.departed[namespace]
	if !ok || namespaceCreated.IsZero() {
		return apply.Target{}, false
	}
	if c.now().Sub(d.at) > DepartedTTL || d.secretCreated.Before(namespaceCreated) ||
		c.checkServer(namespace, d.server, d.serverField, hc) != nil {
		delete(c.departed, namespace)
		return apply.Target{}, false
	}
	return d.target, true
}
