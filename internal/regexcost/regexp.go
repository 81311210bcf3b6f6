package regexcost

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode/utf8"

	"k8s.io/utils/lru"
)

// Limits of one pattern and of one call.
const (
	// MaxPatternBytes bounds the length of a pattern, checked before it is parsed.
	MaxPatternBytes = 4096
	// MaxProgram bounds the instructions a pattern compiles to (as estimated from its syntax
	// before it is compiled): a short pattern can expand to many (`(a{1000}){1000}`).
	MaxProgram = 4096
	// MaxSteps bounds the work of one call: the program's instructions times the input's
	// characters the matcher reads, which is the most Go's matcher does on them. At the slowest
	// measured rate (about 100 ns a step on the CI machine, patterns with many alternatives)
	// this is a tenth of a second; most patterns run many times faster.
	MaxSteps = 1 << 20
)

// cached holds compiled patterns, and the errors of patterns refused, by pattern: an expression
// or a template usually matches one pattern many times, and a refused one must not cost its
// check again at each call. It is bounded in entries, each at most MaxPatternBytes of pattern
// and MaxProgram instructions (class ranges included): some megabytes at most.
var cached = lru.New(cacheEntries)

const cacheEntries = 64

// Regexp is a compiled pattern whose calls are priced before they run.
type Regexp struct {
	re *regexp.Regexp
	// size is the estimated number of instructions of the compiled program: the work of one
	// step of the matcher (one character of input) is at most proportional to it.
	size int64
	// lookBehind is set when the pattern has an assertion that looks at the text before the
	// position where a search starts (^, \A, \b, \B): its matches after the first cannot be
	// found by searching the rest of the input alone.
	lookBehind bool
}

// CostError is a call refused because its work would be over MaxSteps. It names sizes only,
// never the pattern or the input, which may be another party's data.
type CostError struct {
	// Program is the pattern's estimated instruction count; Input the input's length in bytes.
	Program, Input int64
}

func (e *CostError) Error() string {
	return fmt.Sprintf("regular expression too costly: a pattern of %d instructions on %d bytes of input is over the limit of %d steps (instructions × characters read); use a shorter pattern or input",
		e.Program, e.Input, MaxSteps)
}

// Errors of Compile. ErrPattern wraps regexp's parse error, which quotes the pattern; an
// ErrTooLarge message names sizes only.
var (
	ErrPattern  = errors.New("invalid regular expression")
	ErrTooLarge = errors.New("regular expression over the size limits")
)

// Compile parses pattern (RE2 syntax, as regexp.Compile) after checking its length and what
// case folding would cost the parser, and refuses one whose program would be over MaxProgram
// instructions. Compiled patterns and refusals are remembered.
func Compile(pattern string) (*Regexp, error) {
	if v, ok := cached.Get(pattern); ok {
		if err, refused := v.(error); refused {
			return nil, err
		}
		return v.(*Regexp), nil
	}
	r, err := compile(pattern)
	if err != nil {
		cached.Add(pattern, err)
		return nil, err
	}
	cached.Add(pattern, r)
	return r, nil
}

func compile(pattern string) (*Regexp, error) {
	if len(pattern) > MaxPatternBytes {
		return nil, fmt.Errorf("%w: the pattern is %d bytes, over the limit of %d", ErrTooLarge, len(pattern), MaxPatternBytes)
	}
	if err := checkFolding(pattern); err != nil {
		return nil, err
	}
	parsed, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPattern, err)
	}
	size := programSize(parsed)
	if size > MaxProgram {
		return nil, fmt.Errorf("%w: the pattern expands to about %d instructions, over the limit of %d (a repetition count multiplies what it repeats; a Unicode class counts its ranges)", ErrTooLarge, size, MaxProgram)
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPattern, err)
	}
	return &Regexp{re: re, size: size, lookBehind: looksBehind(parsed)}, nil
}

// Steps is the most work one search of input can cost: what a call over one match is priced.
func (r *Regexp) Steps(input string) int64 {
	return r.size * (int64(utf8.RuneCountInString(input)) + 1)
}

func (r *Regexp) check(input string) error {
	if r.Steps(input) > MaxSteps {
		return &CostError{Program: r.size, Input: int64(len(input))}
	}
	return nil
}

// MatchString reports whether s contains a match.
func (r *Regexp) MatchString(s string) (bool, error) {
	if err := r.check(s); err != nil {
		return false, err
	}
	return r.re.MatchString(s), nil
}

// FindString returns the leftmost match in s, "" if none.
func (r *Regexp) FindString(s string) (string, error) {
	if err := r.check(s); err != nil {
		return "", err
	}
	return r.re.FindString(s), nil
}

// FindAllString returns up to n successive matches (all when n < 0), as regexp.FindAllString.
func (r *Regexp) FindAllString(s string, n int) ([]string, error) {
	var out []string
	err := r.all(s, n, func(m []int) { out = append(out, s[m[0]:m[1]]) })
	return out, err
}

// Split slices s into the substrings between matches, as regexp.Split.
func (r *Regexp) Split(s string, n int) ([]string, error) {
	if n == 0 {
		return nil, nil
	}
	if len(r.re.String()) > 0 && len(s) == 0 {
		return []string{""}, nil
	}
	var matches [][]int
	if err := r.all(s, n, func(m []int) { matches = append(matches, m[:2]) }); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(matches))
	beg, end := 0, 0
	for _, m := range matches {
		if n > 0 && len(out) == n-1 {
			break
		}
		end = m[0]
		if m[1] != 0 {
			out = append(out, s[beg:end])
		}
		beg = m[1]
	}
	if end != len(s) {
		out = append(out, s[beg:])
	}
	return out, nil
}

// ReplaceAllString replaces the matches in src with repl, expanding $ references, as
// regexp.ReplaceAllString.
func (r *Regexp) ReplaceAllString(src, repl string) (string, error) {
	return r.replaceAll(src, strings.Contains(repl, "$"),
		func() string { return r.re.ReplaceAllString(src, repl) },
		func(dst []byte, m []int) []byte { return r.re.ExpandString(dst, repl, src, m) })
}

// ReplaceAllLiteralString replaces the matches in src with repl as it is, as
// regexp.ReplaceAllLiteralString.
func (r *Regexp) ReplaceAllLiteralString(src, repl string) (string, error) {
	return r.replaceAll(src, false,
		func() string { return r.re.ReplaceAllLiteralString(src, repl) },
		func(dst []byte, _ []int) []byte { return append(dst, repl...) })
}

// ReplaceAllStringFunc replaces each match in src with what fn returns for it.
func (r *Regexp) ReplaceAllStringFunc(src string, fn func(string) string) (string, error) {
	return r.replaceAll(src, false,
		func() string { return r.re.ReplaceAllStringFunc(src, fn) },
		func(dst []byte, m []int) []byte { return append(dst, fn(src[m[0]:m[1]])...) })
}

// searcher finds matches from a position on, charging each search against one call's budget.
type searcher struct {
	r *Regexp
	s string
	// submatches says the searches return the groups' positions, not only the match's.
	submatches bool
	// left is how many characters the searches of this call may still read.
	left int64
}

// newSearcher prices a call that searches s repeatedly. A pattern that looks behind is run by
// regexp itself, priced at its worst case (a search from every position to the end); any other
// is searched position by position, each search reading at most what is left of the budget.
// Submatches cost more: Go's matcher copies every group's positions for each thread at each
// step, so a step costs once more per group.
func (r *Regexp) newSearcher(s string, submatches bool) (*searcher, error) {
	perChar := r.size
	if submatches {
		perChar *= int64(1 + r.re.NumSubexp())
	}
	if r.lookBehind {
		n := int64(utf8.RuneCountInString(s)) + 1
		if n > MaxSteps/perChar/n {
			return nil, &CostError{Program: r.size, Input: int64(len(s))}
		}
	}
	return &searcher{r: r, s: s, submatches: submatches, left: MaxSteps / perChar}, nil
}

// find returns the indices of the leftmost match at or after pos (with its groups' when the
// searcher returns submatches), nil if none.
func (sr *searcher) find(pos int) ([]int, error) {
	if sr.r.lookBehind {
		// Priced in newSearcher: regexp's own search keeps the text before pos in view.
		return nil, errors.New("internal error: look-behind patterns are not searched by position")
	}
	in := &meteredReader{s: sr.s[pos:], left: sr.left}
	var m []int
	if sr.submatches {
		m = sr.r.re.FindReaderSubmatchIndex(in)
	} else {
		m = sr.r.re.FindReaderIndex(in)
	}
	sr.left -= max(in.read, 1)
	if in.over || sr.left < 0 {
		return nil, &CostError{Program: sr.r.size, Input: int64(len(sr.s))}
	}
	for i := range m {
		if m[i] >= 0 {
			m[i] += pos
		}
	}
	return m, nil
}

// all calls deliver with the submatch indices of up to n successive matches (all when n < 0),
// the matches regexp.FindAllStringSubmatchIndex finds: an empty match right after a match is
// skipped, and the search moves on one character past an empty match.
func (r *Regexp) all(s string, n int, deliver func([]int)) error {
	sr, err := r.newSearcher(s, false)
	if err != nil {
		return err
	}
	if r.lookBehind {
		for _, m := range r.re.FindAllStringIndex(s, n) {
			deliver(m)
		}
		return nil
	}
	if n < 0 {
		n = len(s) + 1
	}
	prevMatchEnd := -1
	for pos, i := 0, 0; i < n && pos <= len(s); {
		m, err := sr.find(pos)
		if err != nil {
			return err
		}
		if m == nil {
			break
		}
		accept := true
		if m[1] == pos {
			if m[0] == prevMatchEnd {
				accept = false
			}
			if pos < len(s) {
				_, width := utf8.DecodeRuneInString(s[pos:])
				pos += width
			} else {
				pos++
			}
		} else {
			pos = m[1]
		}
		prevMatchEnd = m[1]
		if accept {
			deliver(m)
			i++
		}
	}
	return nil
}

// replaceAll builds src with each match replaced by what repl appends, following the rules of
// regexp's ReplaceAll: no replacement for an empty match right after a match, and the search
// always moves on at least one character. A pattern that looks behind is run by regexp's own
// function, std, once newSearcher has priced it.
func (r *Regexp) replaceAll(src string, submatches bool, std func() string, repl func(dst []byte, m []int) []byte) (string, error) {
	sr, err := r.newSearcher(src, submatches)
	if err != nil {
		return "", err
	}
	if r.lookBehind {
		return std(), nil
	}
	var buf []byte
	lastMatchEnd, searchPos := 0, 0
	for searchPos <= len(src) {
		a, err := sr.find(searchPos)
		if err != nil {
			return "", err
		}
		if a == nil {
			break
		}
		buf = append(buf, src[lastMatchEnd:a[0]]...)
		if a[1] > lastMatchEnd || a[0] == 0 {
			buf = repl(buf, a)
		}
		lastMatchEnd = a[1]
		var width int
		if searchPos < len(src) {
			_, width = utf8.DecodeRuneInString(src[searchPos:])
		}
		switch {
		case searchPos+width > a[1]:
			searchPos += width
		case searchPos+1 > a[1]:
			searchPos++
		default:
			searchPos = a[1]
		}
	}
	buf = append(buf, src[lastMatchEnd:]...)
	return string(buf), nil
}

// meteredReader hands the matcher the characters of s one at a time, and ends the input when
// left characters have been read: the matcher then stops within the budget, and the call is
// refused instead of answered.
type meteredReader struct {
	s          string
	i          int
	read, left int64
	over       bool
}

func (m *meteredReader) ReadRune() (rune, int, error) {
	if m.i >= len(m.s) {
		return 0, 0, io.EOF
	}
	if m.read >= m.left {
		m.over = true
		return 0, 0, io.EOF
	}
	c, w := utf8.DecodeRuneInString(m.s[m.i:])
	m.i += w
	m.read++
	return c, w, nil
}

// Size is the pattern's estimated instruction count, its class ranges included: the work of one
// character of input, and what it keeps in memory.
func (r *Regexp) Size() int64 { return r.size }
