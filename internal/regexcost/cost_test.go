package regexcost

import (
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A second read of the fix (issue 41): the first bound priced matching, but not parsing nor
// what a compiled pattern keeps in memory, nor the capture slots the matcher copies.

// Case folding makes Go's parser visit every character of a class range one by one (some
// 125,000 for [B-\x{1E942}] under (?i): 2.6 s for a 4 KiB pattern of them). Such a pattern is
// refused before it is parsed, and a refusal is remembered rather than parsed again.
func TestCaseFoldedWideClassIsRefusedBeforeParsing(t *testing.T) {
	t.Parallel()
	for _, p := range []string{
		`(?i)` + strings.Repeat(`[B-\x{1E942}]`, 300),
		`(?i:x)` + strings.Repeat(`[B-𞥂]`, 300),
		`(?i)` + strings.Repeat(`\pL`, 1000),
		`(?is)` + strings.Repeat(`\p{Greek}`, 400),
		`(?i)` + strings.Repeat(`[\x{100}-\x{FFFF}]`, 200),
	} {
		_, err := Compile(p)
		require.ErrorIs(t, err, ErrTooLarge, p[:20])
		assert.Contains(t, err.Error(), "case-insensitive", "refused by the scan before the parse")
		assert.True(t, remembered(p), "the refusal is remembered")
	}
	// What case-insensitive patterns are written for still compiles.
	for _, p := range []string{`(?i)^v[0-9]+$`, `(?i)true|yes|on`, `(?i)[a-z0-9-]+`, `(?i)straße`, `(?i)[À-ÿ]`, `\pL+`, `(?i)[[:alpha:]]\w+`} {
		_, err := Compile(p)
		assert.NoError(t, err, p)
	}
	_, err := Compile(`(secret`)
	require.ErrorIs(t, err, ErrPattern)
	assert.True(t, remembered(`(secret`), "a pattern that does not parse is parsed once")
	_, err = Compile(`(secret`)
	require.ErrorIs(t, err, ErrPattern)
}

func remembered(pattern string) bool {
	_, ok := cached.Get(pattern)
	return ok
}

// Each Unicode class keeps its table of ranges in the compiled program (some 5 KB for \pL), so
// ranges count against the program's size: a 4 KiB pattern of \pL would keep 7.4 MB, and the
// cache of compiled patterns many times that.
func TestClassRangesCountAgainstTheProgram(t *testing.T) {
	t.Parallel()
	_, err := Compile(strings.Repeat(`\pL`, 1000))
	require.ErrorIs(t, err, ErrTooLarge)
	re, err := Compile(`\pL+`)
	require.NoError(t, err)
	assert.Greater(t, re.size, int64(300), "the ranges of \\pL are in its size")

	// The cache holds a bounded number of patterns, each bounded: filling it keeps little.
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range 200 {
		_, _ = Compile(strings.Repeat(`\pL`, 6) + strings.Repeat("x", i))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	assert.Less(t, int64(after.HeapAlloc)-int64(before.HeapAlloc), int64(64<<20), "heap kept by the cache")
	assert.LessOrEqual(t, cached.Len(), cacheEntries)
}

// Go's matcher copies every capture slot of every thread at each step: a search that returns
// submatches costs its steps times its captures. Only a replacement with $ asks for them, and
// it is priced so.
func TestCapturesArePriced(t *testing.T) {
	t.Parallel()
	re, err := Compile(strings.Repeat(`(a?)`, 682))
	require.NoError(t, err)
	in := strings.Repeat("a", 255)
	_, err = re.ReplaceAllString(in, "$1")
	var cost *CostError
	require.ErrorAs(t, err, &cost, "a replacement that reads submatches pays for them")
	// Without submatches, the same search is within its price.
	_, err = re.FindAllString(in, -1)
	require.NoError(t, err)
	_, err = re.ReplaceAllLiteralString(in, "x")
	require.NoError(t, err)
}
