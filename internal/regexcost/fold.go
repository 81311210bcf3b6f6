package regexcost

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxFoldedClassRunes bounds, in a case-insensitive pattern, the characters of its classes that
// case folding must visit: Go's parser folds a class range one character at a time (only the
// characters between 'A' and U+1E943 can fold), so `(?i)[B-\x{1E942}]`, 14 bytes, is 125,000
// steps, and a pattern of them seconds. ASCII letters are a few dozen and not counted.
const maxFoldedClassRunes = 4096

// checkFolding refuses, before it is parsed, a case-insensitive pattern whose classes would
// make the parser fold more than maxFoldedClassRunes characters, or that folds a Unicode class
// (\pL under (?i) is every letter, one by one). It reads the pattern's text as the parser
// would, erring towards counting: a pattern it cannot read exactly is counted high, never low.
func checkFolding(pattern string) error {
	if !mayFold(pattern) {
		return nil
	}
	var folded int64
	inClass := false
	var prev rune = -1 // the last character of a class, for a range
	for i := 0; i < len(pattern); {
		c, w := utf8.DecodeRuneInString(pattern[i:])
		switch {
		case c == '\\' && i+1 < len(pattern):
			e := pattern[i+1]
			if e == 'p' || e == 'P' {
				return fmt.Errorf("%w: a case-insensitive pattern may not fold a Unicode class (\\p or \\P); write the class without (?i), or list the letters", ErrTooLarge)
			}
			r, n := escapedRune(pattern[i:])
			i += n
			if inClass {
				prev = r
			}
			continue
		case !inClass && c == '[':
			inClass, prev = true, -1
			i += w
			if strings.HasPrefix(pattern[i:], "^") {
				i++
			}
			if strings.HasPrefix(pattern[i:], "]") { // a leading ] is a character
				prev, i = ']', i+1
			}
			continue
		case inClass && c == '[' && strings.HasPrefix(pattern[i:], "[:"):
			if end := strings.Index(pattern[i+2:], ":]"); end >= 0 { // [:alpha:]: ASCII
				i += end + 4
				prev = -1
				continue
			}
		case inClass && c == ']':
			inClass = false
		case inClass && c == '-' && prev >= 0 && i+1 < len(pattern) && pattern[i+1] != ']':
			hi, n := classAtom(pattern[i+1:])
			folded += foldSpan(prev, hi)
			i += 1 + n
			prev = -1
			continue
		case inClass:
			folded += foldSpan(c, c)
			prev = c
		}
		i += w
	}
	if folded > maxFoldedClassRunes {
		return fmt.Errorf("%w: a case-insensitive pattern whose classes span %d characters outside ASCII, over the limit of %d (case folding visits each); narrow the ranges or drop (?i)", ErrTooLarge, folded, maxFoldedClassRunes)
	}
	return nil
}

// mayFold reports whether a flag group of the pattern names i: (?i), (?is:...), (?-i) too.
func mayFold(pattern string) bool {
	for rest := pattern; ; {
		j := strings.Index(rest, "(?")
		if j < 0 {
			return false
		}
		rest = rest[j+2:]
		end := strings.IndexAny(rest, ":)")
		if end < 0 {
			return strings.ContainsRune(rest, 'i')
		}
		if strings.ContainsRune(rest[:end], 'i') {
			return true
		}
	}
}

// classAtom reads one character of a class (a literal or an escape) and its length; an escape
// that is not one character (\d, \w) gives the highest character, to count high.
func classAtom(s string) (rune, int) {
	if strings.HasPrefix(s, `\`) {
		return escapedRune(s)
	}
	r, w := utf8.DecodeRuneInString(s)
	return r, w
}

// escapedRune reads an escape at the start of s (\x41, \x{1E942}, \101, \n, \d) and returns the
// character it stands for and its length; one that stands for a class (\d, \w, \s) or that it
// cannot read gives utf8.MaxRune, which counts high.
func escapedRune(s string) (rune, int) {
	if len(s) < 2 {
		return utf8.MaxRune, len(s)
	}
	switch e := s[1]; {
	case e == 'x' && len(s) > 2 && s[2] == '{':
		end := strings.IndexByte(s, '}')
		if end < 0 {
			return utf8.MaxRune, len(s)
		}
		v, err := strconv.ParseUint(s[3:end], 16, 32)
		if err != nil {
			return utf8.MaxRune, end + 1
		}
		return rune(min(v, utf8.MaxRune)), end + 1
	case e == 'x' && len(s) >= 4:
		v, err := strconv.ParseUint(s[2:4], 16, 8)
		if err != nil {
			return utf8.MaxRune, 4
		}
		return rune(v), 4
	case e >= '0' && e <= '7':
		n := 2
		for n < 4 && n < len(s) && s[n] >= '0' && s[n] <= '7' {
			n++
		}
		v, _ := strconv.ParseUint(s[1:n], 8, 32)
		return rune(v), n
	case e < utf8.RuneSelf && strings.IndexByte(`dDwWsS`, e) < 0:
		return rune(e), 2 // \n, \t, \-, \]: one ASCII character
	default:
		_, w := utf8.DecodeRuneInString(s[1:])
		return utf8.MaxRune, 1 + w
	}
}

// foldSpan counts the characters of lo-hi that case folding visits one by one outside ASCII.
func foldSpan(lo, hi rune) int64 {
	const first, last = 0x80, 0x1E943
	lo, hi = max(lo, first), min(hi, last)
	if hi < lo {
		return 0
	}
	return int64(hi-lo) + 1
}
