// Package receiver answers registry notifications (CNCF Distribution's, Harbor's webhooks, a
// generic payload) over HTTP: it authenticates each request against a key per source, decodes
// which repository and tag were pushed, and hands that on to be woken. It trusts a
// notification for nothing else: no digest, time or host it carries is used.
package receiver
