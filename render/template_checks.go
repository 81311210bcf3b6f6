package render

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/sets"

	"pkgsync.dev/pkgsync/internal/regexcost"
)

// argCheck looks at a function's arguments before the call, to refuse one that would allocate
// past the limits.
type argCheck func(lim templateLimits, args []reflect.Value) error

// shallowFuncs only move values around or look at their top level: their arguments are not
// measured, which keeps the usual `include "x" .`, `set $d ...` and `hasKey .config ...` cheap.
// Every other function has each list or dict argument measured first: fmt and the encoders
// would format a huge value or recurse forever into one that contains itself.
var shallowFuncs = sets.New(
	"include", "list", "tuple", "dict", "get", "set", "unset", "hasKey", "dig", "pluck", "keys",
	"values", "pick", "omit", "append", "push", "mustAppend", "mustPush", "prepend", "mustPrepend",
	"first", "mustFirst", "rest", "mustRest", "last", "mustLast", "initial", "mustInitial",
	"reverse", "mustReverse", "compact", "mustCompact", "slice", "mustSlice", "concat", "chunk",
	"mustChunk", "default", "empty", "coalesce", "all", "any", "ternary", "typeOf", "typeIs",
	"typeIsLike", "kindOf", "kindIs", "uniq", "mustUniq", "has", "mustHas", "without",
	"mustWithout", "deepEqual",
)

// deepResultFuncs build new nested values: their results count against the total by size.
var deepResultFuncs = sets.New("fromJson", "mustFromJson", "fromYAML", "deepCopy", "mustDeepCopy",
	"merge", "mustMerge", "mergeOverwrite", "mustMergeOverwrite", "getFileGlob", "b64decMap")

// argChecks refuse, before the call, what the function would allocate past the limits: from a
// count or size argument, or from formatting its arguments.
var argChecks = map[string]argCheck{
	"repeat":                     checkRepeat,
	"until":                      checkUntil,
	"untilStep":                  checkUntilStep,
	"seq":                        checkSeq,
	"indent":                     checkIndent,
	"nindent":                    checkIndent,
	"wrapWith":                   checkWrapWith,
	"replace":                    checkReplace,
	"regexReplaceAll":            checkRegexReplace(false),
	"mustRegexReplaceAll":        checkRegexReplace(false),
	"regexReplaceAllLiteral":     checkRegexReplace(true),
	"mustRegexReplaceAllLiteral": checkRegexReplace(true),
	"regexFindAll":               checkRegexMatches,
	"mustRegexFindAll":           checkRegexMatches,
	"regexSplit":                 checkRegexMatches,
	"mustRegexSplit":             checkRegexMatches,
	"split":                      checkSplit(-1),
	"splitList":                  checkSplit(-1),
	"splitn":                     checkSplit(1),
	"concat":                     checkItemsSum,
	"keys":                       checkItemsSum,
	"printf":                     checkPrintf,
	"print":                      checkFormatted,
	"println":                    checkFormatted,
	"cat":                        checkFormatted,
	"quote":                      checkFormatted,
	"squote":                     checkFormatted,
	"toString":                   checkFormatted,
	"toStrings":                  checkFormatted,
	"join":                       checkJoin,
	"sortAlpha":                  checkFormatted,
	"toJson":                     checkFormatted,
	"toPrettyJson":               checkFormatted,
	"toRawJson":                  checkFormatted,
	"mustToJson":                 checkFormatted,
	"mustToPrettyJson":           checkFormatted,
	"mustToRawJson":              checkFormatted,
	"toYAML":                     checkFormatted,
	"html":                       checkFormatted,
	"js":                         checkFormatted,
	"urlquery":                   checkFormatted,
}

// overLimit says that a function would produce what is over a limit, before it runs.
func overLimit(what string, limit string) error {
	return fmt.Errorf("refused: %s would be over the %s limit", what, limit)
}

func tooManyItems(n uint64, lim templateLimits) error {
	return overLimit(fmt.Sprintf("%d items", n), fmt.Sprintf("%d item", lim.items))
}

func tooManyBytes(what string, lim templateLimits) error {
	return overLimit(what, formatBytes(lim.outputBytes))
}

// mulOver reports whether a*b+c is over limit, without overflowing; a and b are not negative.
func mulOver(a, b, c, limit int64) bool {
	if a == 0 || b == 0 {
		return c > limit
	}
	return a > (limit-c)/b || a*b+c > limit
}

func checkRepeat(lim templateLimits, args []reflect.Value) error {
	count, s := args[0].Int(), args[1].String()
	if count > 0 && mulOver(count, int64(len(s)), 0, lim.outputBytes) {
		return tooManyBytes(fmt.Sprintf("%d × %d bytes", count, len(s)), lim)
	}
	return nil
}

func checkUntil(lim templateLimits, args []reflect.Value) error {
	count, step := args[0].Int(), int64(1)
	if count < 0 {
		step = -1
	}
	return checkSteps(lim, 0, count, step)
}

func checkUntilStep(lim templateLimits, args []reflect.Value) error {
	return checkSteps(lim, args[0].Int(), args[1].Int(), args[2].Int())
}

// checkSeq mirrors how sprig's seq turns its arguments into a call of untilStep.
func checkSeq(lim templateLimits, args []reflect.Value) error {
	p := make([]int64, len(args))
	for i, a := range args {
		p[i] = a.Int()
	}
	var start, end, step int64
	inc := int64(1)
	switch len(p) {
	case 1:
		start, end = 1, p[0]
		if end < start {
			inc = -1
		}
		step = inc
	case 2:
		start, end = p[0], p[1]
		if end < start {
			inc = -1
		}
		step = inc
	case 3:
		start, step, end = p[0], p[1], p[2]
		if end < start {
			inc = -1
		}
	default:
		return nil
	}
	if (inc > 0 && end == math.MaxInt64) || (inc < 0 && end == math.MinInt64) {
		return fmt.Errorf("refused: %d overflows", end)
	}
	return checkSteps(lim, start, end+inc, step)
}

// checkSteps refuses sprig's untilStep(start, stop, step) when it would return more than the
// item limit, or overflow and never end.
func checkSteps(lim templateLimits, start, stop, step int64) error {
	var n uint64
	switch {
	case step > 0 && stop > start:
		if stop > math.MaxInt64-step+1 {
			return fmt.Errorf("refused: counting to %d by %d overflows", stop, step)
		}
		n = (uint64(stop)-uint64(start)-1)/uint64(step) + 1
	case step < 0 && stop < start:
		if stop < math.MinInt64-step-1 {
			return fmt.Errorf("refused: counting to %d by %d overflows", stop, step)
		}
		n = (uint64(start)-uint64(stop)-1)/(0-uint64(step)) + 1
	}
	if n > uint64(lim.items) {
		return tooManyItems(n, lim)
	}
	return nil
}

func checkIndent(lim templateLimits, args []reflect.Value) error {
	spaces, s := args[0].Int(), args[1].String()
	lines := int64(strings.Count(s, "\n")) + 1
	if spaces > 0 && mulOver(spaces, lines, int64(len(s))+1, lim.outputBytes) {
		return tooManyBytes(fmt.Sprintf("%d spaces × %d lines", spaces, lines), lim)
	}
	return nil
}

// checkWrapWith: every line break, at most one per byte, adds the separator.
func checkWrapWith(lim templateLimits, args []reflect.Value) error {
	sep, s := args[1].String(), args[2].String()
	if mulOver(int64(len(s)), int64(len(sep)), int64(len(s)), lim.outputBytes) {
		return tooManyBytes(fmt.Sprintf("%d bytes with a %d-byte separator", len(s), len(sep)), lim)
	}
	return nil
}

func checkReplace(lim templateLimits, args []reflect.Value) error {
	old, repl, s := args[0].String(), args[1].String(), args[2].String()
	if len(repl) <= len(old) {
		return nil
	}
	n := int64(strings.Count(s, old))
	if mulOver(n, int64(len(repl)-len(old)), int64(len(s)), lim.outputBytes) {
		return tooManyBytes(fmt.Sprintf("%d replacements of %d bytes", n, len(repl)), lim)
	}
	return nil
}

// checkRegexReplace counts the matches first: each adds the replacement, and each $ in it can
// add a submatch, which is at most the match. The count is a call like the replacement itself,
// priced before it runs.
func checkRegexReplace(literal bool) argCheck {
	return func(lim templateLimits, args []reflect.Value) error {
		expr, s, repl := args[0].String(), args[1].String(), args[2].String()
		re, err := regexcost.Compile(expr)
		if err != nil || repl == "" {
			return nil // the function reports the bad expression itself
		}
		var matches, matched int64
		if _, err := re.ReplaceAllStringFunc(s, func(m string) string {
			matches++
			matched += int64(len(m))
			return ""
		}); err != nil {
			return err
		}
		refs := int64(0)
		if !literal {
			refs = int64(strings.Count(repl, "$"))
		}
		if mulOver(matches, int64(len(repl)), int64(len(s)), lim.outputBytes) ||
			mulOver(refs, matched, matches*int64(len(repl))+int64(len(s)), lim.outputBytes) {
			return tooManyBytes(fmt.Sprintf("%d replacements of %d bytes", matches, len(repl)), lim)
		}
		return nil
	}
}

// checkRegexMatches refuses regexFindAll and regexSplit that would return more than the item
// limit. It looks for one match more than the limit allows, no further.
func checkRegexMatches(lim templateLimits, args []reflect.Value) error {
	expr, s, n := args[0].String(), args[1].String(), args[2].Int()
	if n >= 0 && n <= lim.items {
		return nil
	}
	re, err := regexcost.Compile(expr)
	if err != nil {
		return nil // the function reports the bad expression itself
	}
	found, err := re.FindAllString(s, int(lim.items)+1)
	if err != nil {
		return err
	}
	if int64(len(found)) > lim.items {
		return overLimit(fmt.Sprintf("over %d matches", len(found)), fmt.Sprintf("%d item", lim.items))
	}
	return nil
}

// checkSplit refuses split, splitList and splitn (whose count is argument countArg) when they
// would return more than the item limit.
func checkSplit(countArg int) argCheck {
	return func(lim templateLimits, args []reflect.Value) error {
		sep, s := args[0].String(), args[len(args)-1].String()
		var n int64
		if sep == "" {
			n = int64(utf8.RuneCountInString(s))
		} else {
			n = int64(strings.Count(s, sep)) + 1
		}
		if countArg >= 0 {
			if c := args[countArg].Int(); c >= 0 && c < n {
				n = c
			}
		}
		if n > lim.items {
			return tooManyItems(uint64(n), lim)
		}
		return nil
	}
}

// checkItemsSum refuses concat and keys when their arguments hold more entries together than
// the item limit.
func checkItemsSum(lim templateLimits, args []reflect.Value) error {
	var n int64
	for _, a := range args {
		for a.Kind() == reflect.Interface && !a.IsNil() {
			a = a.Elem()
		}
		switch a.Kind() {
		case reflect.Slice, reflect.Array, reflect.Map:
			n += int64(a.Len())
		}
	}
	if n > lim.items {
		return tooManyItems(uint64(n), lim)
	}
	return nil
}

// checkFormatted refuses functions that format or encode their arguments when those come to
// more than the output limit: the result would be at least that big.
func checkFormatted(lim templateLimits, args []reflect.Value) error {
	var n int64
	for _, a := range args {
		n += sizeOf(a, lim.outputBytes-n)
		if n > lim.outputBytes {
			return tooManyBytes("formatting its arguments", lim)
		}
	}
	return nil
}

// checkJoin also counts the separator, which join writes between every two items.
func checkJoin(lim templateLimits, args []reflect.Value) error {
	if err := checkFormatted(lim, args); err != nil {
		return err
	}
	sep, list := args[0].String(), args[1]
	for list.Kind() == reflect.Interface && !list.IsNil() {
		list = list.Elem()
	}
	if list.Kind() != reflect.Slice && list.Kind() != reflect.Array || list.Len() < 2 {
		return nil
	}
	if mulOver(int64(list.Len()-1), int64(len(sep)), sizeOf(list, lim.outputBytes), lim.outputBytes) {
		return tooManyBytes(fmt.Sprintf("%d items joined by %d bytes", list.Len(), len(sep)), lim)
	}
	return nil
}

func checkPrintf(lim templateLimits, args []reflect.Value) error {
	if len(args) == 0 {
		return nil
	}
	sizes := make([]valueSize, len(args)-1)
	for i, a := range args[1:] {
		sizes[i] = measure(a, lim.outputBytes)
	}
	if printfSize(args[0].String(), sizes) > lim.outputBytes {
		return tooManyBytes("the output", lim)
	}
	return nil
}

// printfSize is an upper bound of len(fmt.Sprintf(format, args...)) from the sizes of args. Per
// verb fmt writes the argument (several times it for the escaping verbs), each of its values
// padded to the verb's width and precision; it writes unused arguments after %!(EXTRA.
func printfSize(format string, args []valueSize) int64 {
	const (
		perVerb  = 400 // markers such as %!d(BADINDEX)
		maxWidth = 1e8 // fmt fails a longer width or precision
		escapes  = 6   // %q and %x of a byte: \u00e9, or "% #x" writing 0xe9 and a space
	)
	// Argument indexes ([n]) may print any argument any number of times: count the largest.
	reordered := strings.Contains(format, "[")
	var largest valueSize
	for _, a := range args {
		largest.bytes = max(largest.bytes, a.bytes)
		largest.values = max(largest.values, a.values)
	}
	number := func(i int) (int64, int) {
		var n int64
		for ; i < len(format) && '0' <= format[i] && format[i] <= '9'; i++ {
			n = min(n*10+int64(format[i]-'0'), maxWidth)
		}
		return n, i
	}
	skipIndex := func(i int) int {
		if i < len(format) && format[i] == '[' {
			if end := strings.IndexByte(format[i:], ']'); end >= 0 {
				return i + end + 1
			}
			return i + 1
		}
		return i
	}
	var total int64
	next := 0 // the argument the next verb prints, when not reordered
	for i := 0; i < len(format); {
		if format[i] != '%' {
			total++
			i++
			continue
		}
		i++
		sharp := false
		for ; i < len(format) && strings.IndexByte("+-# 0", format[i]) >= 0; i++ {
			sharp = sharp || format[i] == '#'
		}
		var width, prec int64
		i = skipIndex(i)
		if i < len(format) && format[i] == '*' {
			width, next, i = maxWidth, next+1, i+1
		} else {
			width, i = number(i)
		}
		if i < len(format) && format[i] == '.' {
			i = skipIndex(i + 1)
			if i < len(format) && format[i] == '*' {
				prec, next, i = maxWidth, next+1, i+1
			} else {
				prec, i = number(i)
			}
		}
		i = skipIndex(i)
		if i >= len(format) {
			total += perVerb
			break
		}
		verb, w := utf8.DecodeRuneInString(format[i:])
		i += w
		if verb == '%' {
			total++
			continue
		}
		arg := largest
		if !reordered {
			arg = valueSize{values: 1}
			if next < len(args) {
				arg = args[next]
			}
		}
		next++
		bytes := arg.bytes
		switch {
		case verb == 'q' || verb == 'x' || verb == 'X':
			bytes *= escapes
		case sharp:
			bytes *= 2 // Go syntax names every type
		}
		total += (width+prec)*arg.values + bytes + perVerb
		if total > math.MaxInt64/4 {
			return total
		}
	}
	if reordered {
		total += largest.bytes * int64(len(args))
	} else {
		for ; next < len(args); next++ {
			total += args[next].bytes + perVerb
		}
	}
	return total
}

// formatBytes writes a limit for people: 8 MiB.
func formatBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
