package render

import (
	"errors"

	"pkgsync.dev/pkgsync/internal/regexcost"
)

// regexFuncs are sprig's regular expression functions, with sprig's names and signatures, each
// call priced before it runs (regexcost): Go's regexp cannot be interrupted, so the render's
// deadline would not stop a call on a long pattern or input, nor would the step budget, which
// counts calls, not their work. Like sprig's, regexMatch gives false for a pattern that does not
// parse and the other forms an error; every form returns a pattern or call over the limits as
// an error, rather than a wrong answer. Each also stops when the render's context is done.
func (b *budget) regexFuncs() map[string]any {
	compile := func(pattern string) (*regexcost.Regexp, error) {
		if err := b.ctx.Err(); err != nil {
			return nil, &stopError{reason: err.Error(), err: err}
		}
		return regexcost.Compile(pattern)
	}
	match := func(pattern, s string) (bool, error) {
		re, err := compile(pattern)
		if err != nil {
			return false, err
		}
		return re.MatchString(s)
	}
	find := func(pattern, s string) (string, error) {
		re, err := compile(pattern)
		if err != nil {
			return "", err
		}
		return re.FindString(s)
	}
	findAll := func(pattern, s string, n int) ([]string, error) {
		re, err := compile(pattern)
		if err != nil {
			return nil, err
		}
		return re.FindAllString(s, n)
	}
	replaceAll := func(pattern, s, repl string) (string, error) {
		re, err := compile(pattern)
		if err != nil {
			return "", err
		}
		return re.ReplaceAllString(s, repl)
	}
	replaceAllLiteral := func(pattern, s, repl string) (string, error) {
		re, err := compile(pattern)
		if err != nil {
			return "", err
		}
		return re.ReplaceAllLiteralString(s, repl)
	}
	split := func(pattern, s string, n int) ([]string, error) {
		re, err := compile(pattern)
		if err != nil {
			return nil, err
		}
		return re.Split(s, n)
	}
	return map[string]any{
		"regexMatch": func(pattern, s string) (bool, error) {
			ok, err := match(pattern, s)
			if errors.Is(err, regexcost.ErrPattern) {
				return false, nil // sprig's regexMatch is false for an invalid pattern
			}
			return ok, err
		},
		"mustRegexMatch":             match,
		"regexFind":                  find,
		"mustRegexFind":              find,
		"regexFindAll":               findAll,
		"mustRegexFindAll":           findAll,
		"regexReplaceAll":            replaceAll,
		"mustRegexReplaceAll":        replaceAll,
		"regexReplaceAllLiteral":     replaceAllLiteral,
		"mustRegexReplaceAllLiteral": replaceAllLiteral,
		"regexSplit":                 split,
		"mustRegexSplit":             split,
	}
}
