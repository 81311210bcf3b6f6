package notify

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Defaults of a Notifier's timing and bounds.
const (
	// DefaultRefresh is how often the Secret is read again: a changed configuration is taken
	// within it.
	DefaultRefresh = 30 * time.Second
	// DefaultDedupWindow is how long an event (object, reason and message) is not sent again.
	DefaultDedupWindow = 10 * time.Minute
	// queueLength is how many notifications wait per endpoint; more are dropped and counted.
	queueLength = 256
	// maxDedupKeys bounds the memory of sent events.
	maxDedupKeys = 4096
)

// Notifier forwards notifications to the endpoints configured in a Secret. It is a manager
// Runnable: it reads the Secret when it starts and every Refresh after, and runs one sender
// per endpoint. Notify never blocks.
type Notifier struct {
	// Reader reads the Secret; an uncached reader (the manager's APIReader) keeps the
	// controller's cache free of Secrets.
	Reader client.Reader
	// Secret names the Secret; its data key ConfigKey holds the configuration.
	Secret client.ObjectKey
	Log    logr.Logger
	// Refresh and DedupWindow default to DefaultRefresh and DefaultDedupWindow.
	Refresh     time.Duration
	DedupWindow time.Duration

	mu        sync.Mutex
	endpoints []*sender
	// loaded is the digest of the configuration the senders run; missing says the Secret
	// was absent at the last read, so that its absence is logged once.
	loaded  [sha256.Size]byte
	missing bool
	sent    map[string]time.Time
}

// Notify hands n to every endpoint that wants its kind and reason, unless the same event was
// sent within the dedup window. It returns at once: an endpoint whose queue is full drops it.
func (n *Notifier) Notify(note Notification) {
	n.mu.Lock()
	defer n.mu.Unlock()
	var wanted []*sender
	for _, s := range n.endpoints {
		if s.wants(note.Object.Kind, note.Reason) {
			wanted = append(wanted, s)
		}
	}
	if len(wanted) == 0 {
		return
	}
	key := string(note.Object.UID) + "\x00" + note.Object.Kind + "/" + note.Object.Namespace + "/" + note.Object.Name + "\x00" + note.Reason + "\x00" + note.Message
	if at, ok := n.sent[key]; ok && note.Time.Sub(at) < n.dedupWindow() {
		for _, s := range wanted {
			notifications.WithLabelValues(s.Name, "deduplicated").Inc()
		}
		return
	}
	queued := false
	for _, s := range wanted {
		select {
		case s.queue <- note:
			queued = true
		default:
			notifications.WithLabelValues(s.Name, "dropped").Inc()
			n.Log.Info("notification dropped: the endpoint's queue is full (it is slower than events arrive, or unreachable)",
				"endpoint", s.Name, "reason", note.Reason, "object", note.Object.Name)
		}
	}
	// Only what went out is deduplicated: a dropped event emitted again gets another chance.
	if queued {
		n.remember(key, note.Time)
	}
}

// remember records that key was sent at t, forgetting what is older than the window when the
// memory is full (and everything when that is not enough: a repeat is cheaper than unbounded
// memory).
func (n *Notifier) remember(key string, t time.Time) {
	if n.sent == nil {
		n.sent = map[string]time.Time{}
	}
	if len(n.sent) >= maxDedupKeys {
		for k, at := range n.sent {
			if t.Sub(at) >= n.dedupWindow() {
				delete(n.sent, k)
			}
		}
		if len(n.sent) >= maxDedupKeys {
			clear(n.sent)
		}
	}
	n.sent[key] = t
}

func (n *Notifier) dedupWindow() time.Duration {
	if n.DedupWindow > 0 {
		return n.DedupWindow
	}
	return DefaultDedupWindow
}

// Start reads the configuration and keeps it current until ctx ends.
func (n *Notifier) Start(ctx context.Context) error {
	refresh := n.Refresh
	if refresh <= 0 {
		refresh = DefaultRefresh
	}
	n.load(ctx)
	ticker := time.NewTicker(refresh)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			n.replace(ctx, nil)
			return nil
		case <-ticker.C:
			n.load(ctx)
		}
	}
}

// load reads the Secret and, when its configuration changed, starts senders for it. A
// configuration that cannot be read or parsed keeps the senders running as they are: a typo
// in an edit does not silence the notifications that worked before it.
func (n *Notifier) load(ctx context.Context) {
	var secret corev1.Secret
	err := n.Reader.Get(ctx, n.Secret, &secret)
	switch {
	case apierrors.IsNotFound(err):
		if !n.missing {
			n.Log.Info("no notifications: the Secret is absent", "secret", n.Secret.String(), "key", ConfigKey)
		}
		n.missing = true
		n.loaded = [sha256.Size]byte{}
		n.replace(ctx, nil)
		return
	case err != nil:
		n.Log.Error(err, "read the notification Secret; the endpoints stay as they were", "secret", n.Secret.String())
		return
	}
	n.missing = false
	data := secret.Data[ConfigKey]
	digest := sha256.Sum256(data)
	if digest == n.loaded {
		return
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		n.Log.Error(err, "the notification Secret's configuration is invalid; the endpoints stay as they were until it is fixed",
			"secret", n.Secret.String(), "key", ConfigKey)
		return
	}
	senders := make([]*sender, 0, len(cfg.Endpoints))
	for _, e := range cfg.Endpoints {
		s, err := newSender(e)
		if err != nil {
			n.Log.Error(err, "notification endpoint left out", "endpoint", e.Name)
			continue
		}
		senders = append(senders, s)
	}
	n.loaded = digest
	n.replace(ctx, senders)
	n.Log.Info("notification endpoints configured", "secret", n.Secret.String(), "endpoints", len(senders))
}

// replace stops the running senders and starts senders.
func (n *Notifier) replace(ctx context.Context, senders []*sender) {
	n.mu.Lock()
	old := n.endpoints
	n.endpoints = senders
	n.mu.Unlock()
	for _, s := range old {
		s.stop()
	}
	for _, s := range senders {
		s.start(ctx, n.Log.WithValues("endpoint", s.Name))
	}
}

// errNotSent says a notification failed after its retries, without the address (a Slack
// address is a credential).
var errNotSent = errors.New("notification not sent")

func wrapNotSent(name string, err error) error {
	return fmt.Errorf("%w to endpoint %s: %w", errNotSent, name, err)
}
