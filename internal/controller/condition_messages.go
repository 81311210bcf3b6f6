package controller

import (
	"fmt"
	"unicode/utf8"

	"github.com/fluxcd/pkg/runtime/conditions"
)

// maxConditionMessage bounds a condition message. Messages carry text that others control (a
// registry's error, the media types and issuers of an attacker's signature layers, a
// template's output), and the API server refuses a status whose condition message is over
// 32768 bytes: the whole status write would fail, and the resource would go on showing its
// last status (Ready=True on the old revision) while a tampered push is refused.
const maxConditionMessage = 4096

// boundConditionMessages cuts every condition message of obj to maxConditionMessage bytes,
// on a character boundary, saying how much was left out.
func boundConditionMessages(obj conditions.Setter) {
	conds := obj.GetConditions()
	changed := false
	for i := range conds {
		if m := conds[i].Message; len(m) > maxConditionMessage {
			const room = maxConditionMessage - 64 // for the note
			cut := room
			for cut > 0 && !utf8.RuneStart(m[cut]) {
				cut--
			}
			conds[i].Message = fmt.Sprintf("%s … (%d more bytes left out)", m[:cut], len(m)-cut)
			changed = true
		}
	}
	if changed {
		obj.SetConditions(conds)
	}
}
