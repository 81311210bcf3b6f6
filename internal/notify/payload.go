package notify

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// maxMessageBytes bounds the message a notification carries: an event's message may quote a
// tenant's error text, and a chat channel is no place for a megabyte of it.
const maxMessageBytes = 2048

// Notification is one event on its way to the endpoints.
type Notification struct {
	Object    corev1.ObjectReference
	EventType string
	Reason    string
	Message   string
	Time      time.Time
}

// body encodes n in the endpoint's format.
func (n Notification) body(t EndpointType) ([]byte, error) {
	message := truncate(n.Message)
	if t == Slack {
		ref := n.Object.Kind + " " + n.Object.Name
		if n.Object.Namespace != "" {
			ref = n.Object.Kind + " " + n.Object.Namespace + "/" + n.Object.Name
		}
		return json.Marshal(map[string]string{
			"username": "pkgsync",
			"text":     fmt.Sprintf("%s *%s* %s: %s", severityMark(n.EventType), n.Reason, slackEscape(ref), slackEscape(message)),
		})
	}
	return json.Marshal(eventv1.Event{
		InvolvedObject:      n.Object,
		Severity:            severity(n.EventType),
		Timestamp:           metav1.NewTime(n.Time),
		Message:             message,
		Reason:              n.Reason,
		ReportingController: "pkgsync",
	})
}

// severity is Flux's word for an event type: info or error.
func severity(eventType string) string {
	if eventType == corev1.EventTypeWarning {
		return eventv1.EventSeverityError
	}
	return eventv1.EventSeverityInfo
}

func severityMark(eventType string) string {
	if eventType == corev1.EventTypeWarning {
		return "[error]"
	}
	return "[info]"
}

// truncate cuts s to maxMessageBytes on a rune boundary, saying so.
func truncate(s string) string {
	if len(s) <= maxMessageBytes {
		return s
	}
	cut := maxMessageBytes - len(" …(truncated)")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + " …(truncated)"
}

// slackEscape escapes what Slack reads as markup (&, <, >), so that a message quoting another
// party's text (a member's error from its hosted API server) cannot mention @channel or
// disguise a link.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
