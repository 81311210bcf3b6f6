// Package notify tells the outside when something worth a human's attention happens to a
// resource — a fleet's rollout halts, rolls back, waits for an approval or completes — without
// anyone polling: it forwards chosen events to webhooks that the operator configures in a Secret
// of the controller's namespace, as JSON (Flux's event format, HMAC-signed when a key is given)
// or as Slack-compatible incoming-webhook messages.
//
// It never blocks a reconcile: the recorder that feeds it hands each event to a bounded queue
// per endpoint and drops what does not fit (counted). Each endpoint is rate-limited, repeated
// events are sent once per window, and every request is bounded in time and in the bytes it
// reads back.
package notify
