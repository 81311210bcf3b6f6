package reconciler

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/fluxcd/pkg/runtime/conditions"
)

// maxConditionMessage bounds a condition message. Messages carry text that others control (a
// registry's error, the media types and issuers of an attacker's signature layers, a
// template's output), and the API server refuses a status whose condition message is over
// 32768 bytes: the whole status write would fail, and the resource would go on showing its
// last status (Ready=True on the old revision) while a tampered push is refused.
const maxConditionMessage = 4096

// boundConditionMessages bounds every condition message of obj (BoundMessage, to
// maxConditionMessage bytes). Events are made from the messages after this, so they carry the
// same text.
func boundConditionMessages(obj conditions.Setter) {
	conds := obj.GetConditions()
	changed := false
	for i := range conds {
		if m := BoundMessage(conds[i].Message, maxConditionMessage); m != conds[i].Message {
			conds[i].Message = m
			changed = true
		}
	}
	if changed {
		obj.SetConditions(conds)
	}
}

// BoundMessage cuts a message of text others control to limit bytes, on a character boundary,
// saying how much was left out, and replaces the characters a terminal would act on rather than
// show (see printable). Every message in a status goes through it: conditions, and the members a
// fleet lists.
func BoundMessage(m string, limit int) string {
	m = printable(m)
	if len(m) <= limit {
		return m
	}
	cut := limit - 64 // room for the note
	for cut > 0 && !utf8.RuneStart(m[cut]) {
		cut--
	}
	return fmt.Sprintf("%s … (%d more bytes left out)", m[:cut], len(m)-cut)
}

// printable replaces in s what a registry's or server's error text could use to make `kubectl
// describe` or a terminal show something it does not say: control characters (ANSI escape
// sequences start with ESC) other than newline and tab, and the Unicode marks that reorder
// text (bidirectional overrides and isolates). Invalid UTF-8 is replaced too.
func printable(s string) string {
	clean := true
	for _, r := range s {
		if unprintable(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	return strings.Map(func(r rune) rune {
		if unprintable(r) {
			return utf8.RuneError
		}
		return r
	}, s)
}

func unprintable(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r < 0x20, r >= 0x7f && r <= 0x9f, r == utf8.RuneError:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f:
		return true
	}
	return false
}
