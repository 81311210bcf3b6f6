package render

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"
	"text/template"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// spinTimeout is the deadline the attack tests give a render, like the reconcile deadline does.
const spinTimeout = 2 * time.Second

// limitsManifest declares the one phase the limit tests' objects use.
const limitsManifest = "apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata: {name: p}\nspec:\n  phases: [{name: one}]\n"

// renderTemplateFiles renders a package made of the manifest and files under ctx.
func renderTemplateFiles(ctx context.Context, files map[string]string) error {
	fsys := fstest.MapFS{"manifest.yaml": &fstest.MapFile{Data: []byte(limitsManifest)}}
	for name, data := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(data)}
	}
	_, err := Render(ctx, fsys, Options{})
	return err
}

// TestTemplateAttacksStop renders hostile templates: each must end quickly with an error that
// names the file and the reason, and refuse before it allocates what it asked for.
func TestTemplateAttacksStop(t *testing.T) {
	t.Parallel()
	const file = "manifests/x.yaml.gotmpl"
	tests := []struct {
		name    string
		helpers string // _helpers.tpl, when set
		src     string
		want    []string // every one must be in the error
		anyOf   []string // one of these must be in the error, when set
	}{{
		name: "repeat refused before it allocates",
		src:  `{{ repeat 67108864 "x" }}`,
		want: []string{file + ":1:", "repeat", "67108864 × 1 bytes", "over the 8 MiB limit"},
	}, {
		name:  "nested until spins",
		src:   `{{range $i := until 100000}}{{range $j := until 100000}}{{end}}{{end}}`,
		want:  []string{file + ":1:"},
		anyOf: []string{"until: refused: 100000 items would be over the 10000 item limit", "stopped:"},
	}, {
		name:  "nested until within the item limit spins",
		src:   `{{range $i := until 10000}}{{range $j := until 10000}}{{end}}{{end}}`,
		want:  []string{file + ":1:", "stopped:"},
		anyOf: []string{"context deadline exceeded", "over 1000000 steps"},
	}, {
		name:  "range over an integer spins",
		src:   "a: b\n{{range 100000000000}}{{end}}",
		want:  []string{file + ":2:", "stopped:"},
		anyOf: []string{"context deadline exceeded", "over 1000000 steps"},
	}, {
		name:  "exponential template recursion",
		src:   `{{define "a"}}{{if gt . 0}}{{template "a" (sub . 1)}}{{template "a" (sub . 1)}}{{end}}{{end}}{{template "a" 60}}`,
		want:  []string{file + ":1:", "stopped:"},
		anyOf: []string{"context deadline exceeded", "over 1000000 steps"},
	}, {
		name:    "exponential include recursion in a helper",
		helpers: `{{define "a"}}{{if gt . 0}}{{include "a" (sub . 1)}}{{include "a" (sub . 1)}}{{end}}{{end}}`,
		src:     `{{include "a" 60}}`,
		want:    []string{"stopped:"},
		anyOf:   []string{"context deadline exceeded", "over 1000000 steps"},
	}, {
		name: "string doubling",
		src:  `{{$x := "ab"}}{{range until 40}}{{$x = printf "%s%s" $x $x}}{{end}}`,
		want: []string{file + ":1:", "printf", "over the 8 MiB limit"},
	}, {
		name: "output over the limit",
		src:  `{{range until 9000}}{{ repeat 1024 "x" }}{{end}}`,
		want: []string{file, "stopped: output over 8 MiB limit"},
	}, {
		name:    "include output counts",
		helpers: `{{define "big"}}{{ repeat 3145728 "x" }}{{end}}`,
		src:     `{{include "big" .}}{{include "big" .}}{{include "big" .}}`,
		want:    []string{file, "stopped: output over 8 MiB limit"},
	}, {
		name: "indent refused before it allocates",
		src:  `{{ indent 100000000 "a\nb" }}`,
		want: []string{file + ":1:", "indent", "over the 8 MiB limit"},
	}, {
		name: "replace of the empty string",
		src:  `{{ replace "" (repeat 1000 "y") (repeat 100000 "x") }}`,
		want: []string{file + ":1:", "replace", "over the 8 MiB limit"},
	}, {
		name: "regexReplaceAll of the empty match",
		src:  `{{ regexReplaceAll "" (repeat 10000 "x") (repeat 1000 "y") }}`,
		want: []string{file + ":1:", "regexReplaceAll", "over the 8 MiB limit"},
	}, {
		name: "printf widths",
		src:  `{{ printf (repeat 100 "%[1]999999d") 1 }}`,
		want: []string{file + ":1:", "printf", "over the 8 MiB limit"},
	}, {
		name: "split into too many items",
		src:  `{{ $x := splitList "" (repeat 100000 "x") }}`,
		want: []string{file + ":1:", "splitList", "over the 10000 item limit"},
	}, {
		name: "list of big strings serialized",
		src:  `{{$s := repeat 1048576 "x"}}{{$l := list}}{{range until 100}}{{$l = append $l $s}}{{end}}{{toJson $l}}`,
		want: []string{file + ":1:", "toJson", "over the 8 MiB limit"},
	}, {
		name: "list of big strings printed",
		src:  `{{$s := repeat 1048576 "x"}}{{$l := list}}{{range until 100}}{{$l = append $l $s}}{{end}}{{$l}}`,
		want: []string{file + ":1:", "over the 8 MiB limit"},
	}, {
		name: "dict that contains itself printed",
		src:  `{{$d := dict}}{{$_ := set $d "self" $d}}{{$d}}`,
		want: []string{file + ":1:", "over the 8 MiB limit"},
	}, {
		name: "dict that contains itself formatted",
		src:  `{{$d := dict}}{{$_ := set $d "self" $d}}{{toString $d}}`,
		want: []string{file + ":1:", "toString", "over the 8 MiB limit"},
	}, {
		name: "html escaping of a big value",
		src:  `{{ html (repeat 2200000 "<") }}`,
		want: []string{file + ":1:", "html", "over the 8 MiB limit"},
	}, {
		// Reaching the total takes long enough, with the race detector, for the deadline to
		// come first; TestTemplateBudgets checks the total on its own.
		name:  "allocations across the render",
		src:   `{{range until 1000}}{{$x := repeat 1048576 "x"}}{{end}}`,
		want:  []string{file + ":1:", "stopped:"},
		anyOf: []string{"templates produced over 32 MiB in total", "context deadline exceeded"},
	}, {
		name:  "self-appending list",
		src:   `{{$l := list}}{{range until 9000}}{{$l = append $l $l}}{{end}}`,
		want:  []string{file + ":1:", "stopped:"},
		anyOf: []string{"templates produced over 32 MiB in total", "context deadline exceeded"},
	}, {
		name: "join repeats its separator",
		src:  `{{ join (repeat 4000000 "x") (until 10000) }}`,
		want: []string{file + ":1:", "join", "over the 8 MiB limit"},
	}, {
		name: "printf width applies to every item",
		src:  `{{ printf "%999999v" (until 10000) }}`,
		want: []string{file + ":1:", "printf", "over the 8 MiB limit"},
	}, {
		// Issue 41: Go's regexp runs in pattern × input time and cannot be interrupted, so a
		// deadline does not stop it; each call is priced before it runs.
		name: "regexMatch of a long input against itself",
		src:  `{{ $s := repeat 65536 "a" }}{{ regexMatch $s $s }}`,
		want: []string{file + ":1:", "regexMatch", "over the size limits", "65536 bytes, over the limit of 4096"},
	}, {
		name: "mustRegexMatch of a pattern within limits on a long input",
		src:  `{{ mustRegexMatch (repeat 800 "(a|b)") (repeat 200000 "a") }}`,
		want: []string{file + ":1:", "mustRegexMatch", "too costly"},
	}, {
		name: "regexFind of a long pattern on a long input",
		src:  `{{ regexFind (repeat 800 "(a|b)") (repeat 200000 "a") }}`,
		want: []string{file + ":1:", "regexFind", "too costly"},
	}, {
		name: "regexFindAll searches from every position",
		src:  `{{ regexFindAll "a*b|a" (repeat 32768 "a") -1 }}`,
		want: []string{file + ":1:", "regexFindAll", "too costly"},
	}, {
		name: "regexReplaceAll searches from every position",
		src:  `{{ regexReplaceAll "a*b|a" (repeat 32768 "a") "x" }}`,
		want: []string{file + ":1:", "regexReplaceAll", "too costly"},
	}, {
		name: "regexReplaceAllLiteral searches from every position",
		src:  `{{ regexReplaceAllLiteral "a*b|a" (repeat 32768 "a") "x" }}`,
		want: []string{file + ":1:", "regexReplaceAllLiteral", "too costly"},
	}, {
		name: "regexSplit searches from every position",
		src:  `{{ regexSplit "a*b|a" (repeat 32768 "a") -1 }}`,
		want: []string{file + ":1:", "regexSplit", "too costly"},
	}, {
		name: "a pattern that expands to a large program",
		src:  `{{ regexMatch "(abcdefgh){500}" "x" }}`,
		want: []string{file + ":1:", "regexMatch", "instructions"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), spinTimeout)
			defer cancel()
			files := map[string]string{file: tt.src}
			if tt.helpers != "" {
				files["_helpers.tpl"] = tt.helpers
			}
			start := time.Now()
			err := renderTemplateFiles(ctx, files)
			elapsed := time.Since(start)
			require.Error(t, err)
			// Loose: the subtests run side by side under the race detector on two shared cores
			// (3.2 s was seen); a render that ignored the deadline would take minutes.
			assert.Less(t, elapsed, spinTimeout+5*time.Second, "the render must stop at the deadline")
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
			if tt.anyOf != nil {
				found := false
				for _, w := range tt.anyOf {
					found = found || strings.Contains(err.Error(), w)
				}
				assert.True(t, found, "error %q has none of %q", err, tt.anyOf)
			}
			assert.LessOrEqual(t, len(err.Error()), 4096, "errors stay short enough for a status condition")
		})
	}
}

// TestTemplateBudgets runs templates under lowered limits, to check each limit and its message
// on its own, without waiting for big numbers.
func TestTemplateBudgets(t *testing.T) {
	t.Parallel()
	small := templateLimits{outputBytes: 1 << 10, totalBytes: 1 << 20, items: 100, steps: 1000}
	tests := []struct {
		name    string
		limits  templateLimits
		src     string
		wantErr string // whole message
		isCtx   error  // the context error it must wrap, when set
	}{{
		name:    "steps",
		limits:  small,
		src:     "x\n{{range 100000}}{{end}}",
		wantErr: "x.gotmpl:2: template: stopped: over 1000 steps (range iterations and template calls)",
	}, {
		name:    "template calls are steps",
		limits:  small,
		src:     `{{define "a"}}{{end}}{{range until 30}}{{range until 30}}{{template "a"}}{{end}}{{end}}`,
		wantErr: "x.gotmpl:1: template: stopped: over 1000 steps (range iterations and template calls)",
	}, {
		name:    "output",
		limits:  small,
		src:     `{{range until 100}}0123456789abcdef{{end}}`,
		wantErr: "x.gotmpl: template: stopped: output over 1 KiB limit",
	}, {
		name:    "string result",
		limits:  small,
		src:     `{{ $x := b64enc (repeat 1000 "x") }}`,
		wantErr: `x.gotmpl:1: template: executing "x.gotmpl" at <b64enc (repeat 1000 "x")>: error calling b64enc: result of 1336 bytes is over the 1 KiB limit`,
	}, {
		name:    "list result",
		limits:  small,
		src:     `{{ $x := splitList "," (repeat 50 "a,b,c") }}`,
		wantErr: `x.gotmpl:1: template: executing "x.gotmpl" at <splitList "," (repeat 50 "a,b,c")>: error calling splitList: refused: 101 items would be over the 100 item limit`,
	}, {
		name:    "total",
		limits:  templateLimits{outputBytes: 1 << 20, totalBytes: 1 << 20, items: 100, steps: 1000},
		src:     `{{range until 100}}{{$x := repeat 65536 "x"}}{{end}}`,
		wantErr: "x.gotmpl:1: template: stopped: templates produced over 1 MiB in total",
	}, {
		name:    "self-appending list",
		limits:  templateLimits{outputBytes: 1 << 20, totalBytes: 1 << 20, items: 10000, steps: 1000000},
		src:     `{{$l := list}}{{range until 1000}}{{$l = append $l $l}}{{end}}`,
		wantErr: "x.gotmpl:1: template: stopped: templates produced over 1 MiB in total",
	}, {
		name:    "decoded documents count by size",
		limits:  templateLimits{outputBytes: 1 << 20, totalBytes: 1 << 20, items: 100, steps: 1000},
		src:     `{{$j := printf "[%s0]" (repeat 50000 "0,")}}{{range until 20}}{{$x := fromJson $j}}{{end}}`,
		wantErr: "x.gotmpl:1: template: stopped: templates produced over 1 MiB in total",
	}, {
		name:    "overflowing untilStep",
		limits:  small,
		src:     `{{ untilStep 9223372036854775806 9223372036854775807 10 }}`,
		wantErr: `x.gotmpl:1: template: executing "x.gotmpl" at <untilStep 9223372036854775806 9223372036854775807 10>: error calling untilStep: refused: counting to 9223372036854775807 by 10 overflows`,
	}, {
		name:    "canceled",
		limits:  defaultTemplateLimits,
		src:     `x`,
		wantErr: "x.gotmpl:1: template: stopped: context canceled",
		isCtx:   context.Canceled,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if tt.isCtx != nil {
				cancel()
			}
			tp := newTemplater(ctx, nil, nil, map[string]any{}, nil)
			tp.budget.limits = tt.limits
			_, err := tp.execute("x.gotmpl", tt.src)
			require.NotNil(t, err)
			assert.Equal(t, tt.wantErr, err.Error())
			if tt.isCtx != nil {
				assert.ErrorIs(t, err, tt.isCtx)
			}
		})
	}
}

// FuzzPrintfSize checks that printfSize is an upper bound of what fmt writes, whatever the
// format.
func FuzzPrintfSize(f *testing.F) {
	for _, seed := range []string{
		"", "%", "%%", "%v", "%s %d %q %x", "%[2]*[1]d", "%[3]v%[1]v%[9]v", "%-10.3f|%+#v", "%5v",
		"%.9999v", "%*v", "%!", "%[1", "% #x", "%U %#U %c", "%9999999999999999999999d", "abc%",
	} {
		f.Add(seed)
	}
	args := []any{"abc\x01é", 1234567, -1.7976931348623157e+308, []any{"x", 2, 3.5}, map[string]any{"k": "v", "n": []any{nil, true}}, nil}
	sizes := make([]valueSize, len(args))
	for i, a := range args {
		sizes[i] = measure(reflect.ValueOf(a), 1<<20)
	}
	f.Fuzz(func(t *testing.T, format string) {
		bound := printfSize(format, sizes)
		if bound > 64<<20 {
			return // refused; formatting it would only slow the fuzzer down
		}
		got := len(fmt.Sprintf(format, args...))
		assert.GreaterOrEqual(t, bound, int64(got), "format %q", format)
	})
}

// TestTemplateDeadlineNamesTheFile checks that a render stopped by its context reports the
// file it was in, and that callers can still tell a deadline apart.
func TestTemplateDeadlineNamesTheFile(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	// Steps slow enough that the step budget cannot be what stops it within the deadline; the
	// deadline is checked between steps, so each is kept short.
	src := "a: b\n{{range $i := until 10000}}{{range $j := until 10000}}{{ $x := regexReplaceAll \"a\" (repeat 1000 \"a\") \"b\" }}{{end}}{{end}}"
	start := time.Now()
	err := renderTemplateFiles(ctx, map[string]string{"spin.yaml.gotmpl": src})
	require.Error(t, err)
	assert.Less(t, time.Since(start), spinTimeout)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	var e *Error
	require.True(t, errors.As(err, &e), "a render error naming the file, got %T: %v", err, err)
	assert.Equal(t, "spin.yaml.gotmpl", e.File)
	assert.Equal(t, 2, e.Line)
	assert.Contains(t, err.Error(), "spin.yaml.gotmpl:2: template: stopped: context deadline exceeded")
}

// TestTemplateLimitsKeepNormalTemplates renders templates that use the bounded functions the
// way packages do: the bounds must not change their output.
func TestTemplateLimitsKeepNormalTemplates(t *testing.T) {
	t.Parallel()
	src := `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ printf "%s-%03d" "cm" 7 }}
  annotations: {pkgsync.dev/phase: one}
data:
  print: {{ print "a" 1 | quote }}
  println: {{ println "a" "b" | trim | quote }}
  repeat: {{ repeat 3 "ab" }}
  until: {{ until 3 | join "," | quote }}
  untilStep: {{ untilStep 0 10 4 | join "," | quote }}
  seq: {{ seq 3 | quote }}
  indent: |
{{ "x: 1\ny: 2" | indent 4 }}
  replace: {{ replace "a" "bb" "banana" }}
  regex: {{ regexReplaceAll "a(x*)b" "-ab-axxb-" "${1}W" }}
  split: {{ (splitList "," "a,b,c") | len | quote }}
  json: {{ dict "k" (list 1 "two") | toJson | quote }}
  yaml: {{ dict "k" "v" | toYAML | quote }}
  html: {{ html "<a>" | quote }}
  nil: {{ index (dict) "missing" }}
  none: {{ $m := dict "k" nil }}{{ $m.k | default "dflt" }}
`
	fsys := fstest.MapFS{
		"manifest.yaml":  &fstest.MapFile{Data: []byte(limitsManifest)},
		"cm.yaml.gotmpl": &fstest.MapFile{Data: []byte(src)},
	}
	res, err := Render(t.Context(), fsys, Options{})
	require.NoError(t, err)
	require.Len(t, res.Phases[0].Objects, 1)
	obj := res.Phases[0].Objects[0]
	assert.Equal(t, "cm-007", obj.GetName())
	data, _, err := unstructured.NestedStringMap(obj.Object, "data")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{
		"print":     "a1",
		"println":   "a b",
		"repeat":    "ababab",
		"until":     "0,1,2",
		"untilStep": "0,4,8",
		"seq":       "1 2 3",
		"indent":    "x: 1\ny: 2\n",
		"replace":   "bbbnbbnbb",
		"regex":     "-W-xxW-",
		"split":     "3",
		"json":      `{"k":[1,"two"]}`,
		"yaml":      "k: v",
		"html":      "&lt;a&gt;",
		"nil":       "<no value>",
		"none":      "dflt",
	}, data)
}

// A template's fail can make its error 8 MiB; finding the file and line in it must not cost a
// regular expression over all of it (1.2 s and 156 MB were seen): only its head is read, where
// text/template writes the chain of templates.
func TestTemplateErrorReadsOnlyTheHead(t *testing.T) {
	t.Parallel()
	huge := errors.New("template: manifests/x.yaml.gotmpl:3:4: executing \"manifests/x.yaml.gotmpl\" at <fail>: error calling fail: " +
		strings.Repeat("template: evil.yaml:99: ", 350_000))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	e := templateError("manifests/x.yaml.gotmpl", huge)
	runtime.ReadMemStats(&after)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(48<<20), "bytes allocated reading the error")
	assert.NotZero(t, e.Line)
}

// TestTemplaterBindsTheFunctionsItsTemplatesName: a render binds only the functions whose
// names occur in its templates and helpers, as whole identifiers; the functions instrument
// calls are always there, and a template calling a function bound for no one fails to parse
// as it would have.
func TestTemplaterBindsTheFunctionsItsTemplatesName(t *testing.T) {
	t.Parallel()
	tr := &tree{
		helpers:     map[string]string{"_helpers.tpl": `{{ define "h" }}{{ trunc 3 . }}{{ end }}`},
		helperOrder: []string{"_helpers.tpl"},
		files: map[string]string{
			"a.yaml.gotmpl": `name: {{ upper .name | quote }}{{/* b64enc in a comment counts too */}}`,
			"b.yaml":        `not a template: {{ lower }}`,
		},
	}
	tp := newTemplaterFor(t.Context(), tr, map[string]any{"name": "x"}, nil)
	var names []string
	for name := range tp.funcs {
		names = append(names, name)
	}
	assert.ElementsMatch(t, []string{"upper", "quote", "trunc", "b64enc", tickFunc, printableFunc}, names)

	out, err := tp.execute("a.yaml.gotmpl", tr.files["a.yaml.gotmpl"])
	require.Nil(t, err)
	assert.Equal(t, `name: "X"`, out)
	_, err = tp.execute("c.yaml.gotmpl", `{{ lower .name }}`)
	require.NotNil(t, err)
	assert.Contains(t, err.Error(), `function "lower" not defined`)

	assert.Equal(t, map[string]bool{"upper": true}, namesIn([]string{"xupper upperx upper_ _upper", "upper"}, template.FuncMap{"upper": 1, "x": 1}))
}
