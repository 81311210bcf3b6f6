package regexcost

import (
	"errors"
	"regexp"
	"regexp/syntax"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The attack of issue 41: a pattern as long as its input, matched against itself. Go's regexp
// would run about len² steps (22 s at 64 KiB); it is refused before it runs.
func TestSelfMatchIsRefusedBeforeItRuns(t *testing.T) {
	t.Parallel()
	for _, n := range []int{16 << 10, 64 << 10} {
		s := strings.Repeat("a", n)
		_, err := Compile(s)
		require.ErrorIs(t, err, ErrTooLarge, "a %d byte pattern", n)
		assert.NotContains(t, err.Error(), "aaaa", "the message names sizes, not the pattern")
	}
	// The longest pattern allowed, on the longest input its program can read within the limit.
	re, err := Compile(strings.Repeat("a", 1000))
	require.NoError(t, err)
	_, err = re.MatchString(strings.Repeat("a", 64<<10))
	var cost *CostError
	require.ErrorAs(t, err, &cost)
	assert.EqualValues(t, 64<<10, cost.Input)
	assert.NotContains(t, err.Error(), "aaaa")
	ok, err := re.MatchString(strings.Repeat("a", 1000))
	require.NoError(t, err)
	assert.True(t, ok)
}

// A short pattern that expands to a large program is refused from its syntax, before it is
// compiled.
func TestExpandingPatternIsRefused(t *testing.T) {
	t.Parallel()
	_, err := Compile(`(abcdefgh){500}`)
	require.ErrorIs(t, err, ErrTooLarge)
	assert.Contains(t, err.Error(), "instructions")
}

// Successive matches cost a search each: with Go's regexp, `a*b|a` over n a's costs n²
// (16 KiB: 4 s). The searches here read at most the budget's characters, counted.
func TestAllMatchesAreBoundedInTotal(t *testing.T) {
	t.Parallel()
	re, err := Compile(`a*b|a`)
	require.NoError(t, err)
	s := strings.Repeat("a", 16<<10)
	_, err = re.FindAllString(s, -1)
	var cost *CostError
	require.ErrorAs(t, err, &cost)
	_, err = re.ReplaceAllString(s, "x")
	require.ErrorAs(t, err, &cost)
	_, err = re.Split(s, -1)
	require.ErrorAs(t, err, &cost)

	// What the searches read is counted: the budget, not more.
	sr, err := re.newSearcher(s, false)
	require.NoError(t, err)
	start := sr.left
	for pos := 0; ; pos++ {
		if _, err := sr.find(pos); err != nil {
			break
		}
	}
	assert.LessOrEqual(t, start-sr.left, start+int64(len(s)), "characters read by all searches")
	assert.EqualValues(t, MaxSteps/re.size, start)

	// A pattern whose matches end where they are found costs a character each.
	re, err = Compile(`a`)
	require.NoError(t, err)
	out, err := re.ReplaceAllString(s, "b")
	require.NoError(t, err)
	assert.Equal(t, strings.Repeat("b", len(s)), out)
}

// A pattern that looks behind is priced at its worst case, a search from every position.
func TestLookBehindIsPricedAtItsWorst(t *testing.T) {
	t.Parallel()
	re, err := Compile(`\ba`)
	require.NoError(t, err)
	assert.True(t, re.lookBehind)
	_, err = re.ReplaceAllString(strings.Repeat("a ", 4<<10), "b")
	var cost *CostError
	require.ErrorAs(t, err, &cost)
	out, err := re.ReplaceAllString("a ab ba", "X")
	require.NoError(t, err)
	assert.Equal(t, "X Xb ba", out)
}

// The estimate is never below the instructions regexp compiles a pattern to.
func TestProgramSizeIsAnUpperBound(t *testing.T) {
	t.Parallel()
	for _, p := range []string{
		``, `a`, `abc`, `a|b|c`, `(a|b)*c`, `[a-z]+`, `(?i)hello`, `a{3,7}`, `(ab){2,}`, `x{0,5}y?`,
		`^\d{3}-\d{4}$`, `(?m)^foo$`, `\bword\B`, `((a|b){3}c){4}`, `.*`, `[^\n]*?`, `(?s).`,
		`(a(b(c(d)?)?)?)?`, `\pL+`, `(?:x|y|z){10}`,
	} {
		parsed, err := syntax.Parse(p, syntax.Perl)
		require.NoError(t, err, p)
		prog, err := syntax.Compile(parsed.Simplify())
		require.NoError(t, err, p)
		assert.GreaterOrEqual(t, programSize(parsed), int64(len(prog.Inst)), p)
	}
}

// Every function gives what regexp gives, on the patterns and inputs of this table and of the
// fuzz corpus.
func TestSameResultsAsRegexp(t *testing.T) {
	t.Parallel()
	for _, c := range differentialCases {
		checkSame(t, c.pattern, c.input, c.repl)
	}
}

var differentialCases = []struct{ pattern, input, repl string }{
	{`a*`, "baaab", "-"},
	{`a*?`, "baaab", "<$0>"},
	{``, "abc", "-"},
	{`x*`, "", "y"},
	{`(a)(b)?`, "abab a", "${2}$1"},
	{`[0-9]+`, "v1.22.3-rc4", "N"},
	{`.`, "héllo, 世界", "."},
	{`(?m)$`, "a\nb\n", "!"},
	{`a|ab`, "abab", "x"},
	{`a*b|a`, "aaaa", "x"},
	{`\s+`, " a  b\tc\n", " "},
	{`(?i)K`, "kKk", "z"},
	{`\b`, "ab cd", "|"},
	{`^`, "ab\ncd", ">"},
	{`(?m)^`, "ab\ncd", ">"},
	{`\Bb`, "abb b", "X"},
	{"\xff", "a\xffb\xff", "?"},
	{`$`, "abc", "!"},
}

func checkSame(t testing.TB, pattern, input, repl string) {
	want, err := regexp.Compile(pattern)
	if err != nil {
		return
	}
	re, err := Compile(pattern)
	if err != nil {
		return // over a size limit
	}
	if re.Steps(input)*int64(len(input)+1) > MaxSteps {
		return // may be refused, which is checked elsewhere
	}
	ok, err := re.MatchString(input)
	require.NoError(t, err)
	assert.Equal(t, want.MatchString(input), ok, "MatchString(%q, %q)", pattern, input)
	found, err := re.FindString(input)
	require.NoError(t, err)
	assert.Equal(t, want.FindString(input), found, "FindString(%q, %q)", pattern, input)
	for _, n := range []int{-1, 0, 1, 2} {
		all, err := re.FindAllString(input, n)
		require.NoError(t, err)
		assert.Equal(t, want.FindAllString(input, n), all, "FindAllString(%q, %q, %d)", pattern, input, n)
		split, err := re.Split(input, n)
		require.NoError(t, err)
		assert.Equal(t, want.Split(input, n), split, "Split(%q, %q, %d)", pattern, input, n)
	}
	out, err := re.ReplaceAllString(input, repl)
	require.NoError(t, err)
	assert.Equal(t, want.ReplaceAllString(input, repl), out, "ReplaceAllString(%q, %q, %q)", pattern, input, repl)
	out, err = re.ReplaceAllLiteralString(input, repl)
	require.NoError(t, err)
	assert.Equal(t, want.ReplaceAllLiteralString(input, repl), out, "ReplaceAllLiteralString(%q, %q, %q)", pattern, input, repl)
	out, err = re.ReplaceAllStringFunc(input, strings.ToUpper)
	require.NoError(t, err)
	assert.Equal(t, want.ReplaceAllStringFunc(input, strings.ToUpper), out, "ReplaceAllStringFunc(%q, %q)", pattern, input)
}

func FuzzSameResultsAsRegexp(f *testing.F) {
	for _, c := range differentialCases {
		f.Add(c.pattern, c.input, c.repl)
	}
	f.Fuzz(func(t *testing.T, pattern, input, repl string) {
		if len(pattern) > 64 || len(input) > 256 {
			return
		}
		checkSame(t, pattern, input, repl)
	})
}

func TestErrorsAreClassified(t *testing.T) {
	t.Parallel()
	_, err := Compile(`(secret`)
	require.ErrorIs(t, err, ErrPattern)
	assert.False(t, errors.As(err, new(*CostError)))
}
