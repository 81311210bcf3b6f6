package apply

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// maxFailureConditions bounds how many of an object's conditions a failure reason quotes, and
// maxConditionReason and maxConditionMessage each one's reason and message, in bytes, cut on a
// character boundary: the object's status is written by whoever writes the object (on a hosted
// cluster, its administrators), and the reason ends up in the resource's status, in
// status.phases as it is.
const (
	maxFailureConditions = 3
	maxConditionReason   = 128
	maxConditionMessage  = 256
)

// failureConditions returns, for an object kstatus found Failed, the conditions in which the
// object says so itself, "Type=Status Reason: message" each: a Deployment's Progressing=False
// ProgressDeadlineExceeded with the ReplicaSet that timed out, a Job's Failed=True
// BackoffLimitExceeded. kstatus's own message ("Progress deadline exceeded") does not carry
// the object's reason, which is what a user searches for and what `kubectl describe` shows.
// Reasons and messages are quoted on one line of printable text (quoteCondition).
func failureConditions(live *unstructured.Unstructured) string {
	conditions, _, _ := unstructured.NestedSlice(live.Object, "status", "conditions")
	var out []string
	for _, c := range conditions {
		if len(out) == maxFailureConditions {
			break
		}
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		typ, _ := m["type"].(string)
		st, _ := m["status"].(string)
		if !conditionSaysFailed(typ, st) {
			continue
		}
		s := typ + "=" + st
		if reason, _ := m["reason"].(string); reason != "" {
			s += " " + quoteCondition(reason, maxConditionReason)
		}
		if msg, _ := m["message"].(string); msg != "" {
			s += ": " + quoteCondition(msg, maxConditionMessage)
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return ""
	}
	return fmt.Sprintf(" (%s)", strings.Join(out, "; "))
}

// quoteCondition returns text of an object's condition as at most limit bytes of one line of
// printable text, cut on a character boundary and marked "…" when cut: line breaks and tabs
// become spaces (a quote is one line of a reason), and what a terminal would act on rather
// than show, as the controller's condition messages refuse it (control characters, the marks
// that reorder text, invalid UTF-8), becomes U+FFFD.
func quoteCondition(s string, limit int) string {
	s, cut := cutAt(s, limit) // before the replacements: a long text costs only its quoted part
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			return ' '
		case r < 0x20, r >= 0x7f && r <= 0x9f, r == utf8.RuneError,
			r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f:
			return utf8.RuneError
		}
		return r
	}, s)
	s, again := cutAt(s, limit) // a replacement may be longer than what it replaced
	if cut || again {
		s += "…"
	}
	return s
}

// cutAt returns the longest prefix of s of at most limit bytes that ends on a character
// boundary, and whether it is shorter than s.
func cutAt(s string, limit int) (string, bool) {
	if len(s) <= limit {
		return s, false
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut], true
}

// conditionSaysFailed reports whether a condition is one of those kstatus reads a failure from:
// the progress or readiness conditions false, or a failure condition true.
func conditionSaysFailed(typ, status string) bool {
	switch typ {
	case "Progressing", "Ready", "Available", "Complete":
		return status == "False"
	case "Failed", "Stalled", "ReplicaFailure":
		return status == "True"
	}
	return false
}
