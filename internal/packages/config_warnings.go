package packages

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/render"
)

// reportWarnings puts a render's warnings in the status of obj, a line each within the bounds of
// the field, and records a Warning event when they differ from the ones there: the Package is not
// failed for them (a configuration key its schema does not declare is dropped, as the API
// server drops an unknown field), but its author is told, once per change rather than once per
// pass.
func reportWarnings(rec record.EventRecorder, obj packageObject, warnings []render.Warning) {
	status := obj.GetStatus()
	lines := warningLines(warnings)
	if slices.Equal(lines, status.Warnings) {
		return
	}
	status.Warnings = lines
	if len(lines) > 0 && rec != nil {
		rec.Event(obj, corev1.EventTypeWarning, v1alpha1.ConfigPrunedReason, strings.Join(lines, "\n"))
	}
}

// warningLines are the status lines of warnings: at most MaxStatusWarnings, the last saying how
// many more there were, each cut to MaxStatusWarningLength bytes.
func warningLines(warnings []render.Warning) []string {
	if len(warnings) == 0 {
		return nil
	}
	lines := make([]string, 0, min(len(warnings), v1alpha1.MaxStatusWarnings))
	for i, w := range warnings {
		if i == v1alpha1.MaxStatusWarnings-1 && len(warnings) > v1alpha1.MaxStatusWarnings {
			lines = append(lines, fmt.Sprintf("and %d more", len(warnings)-i))
			break
		}
		lines = append(lines, truncate(w.Message, v1alpha1.MaxStatusWarningLength))
	}
	return lines
}

// truncate cuts s to at most n bytes, on a rune boundary, marking the cut with "...".
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "..."
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
