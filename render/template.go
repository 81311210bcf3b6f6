package render

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"strconv"
	"strings"
	"text/template"
	"unicode/utf8"

	"github.com/Masterminds/sprig/v3"
	"sigs.k8s.io/yaml"
)

// unsafeFuncs are the sprig functions a package template must not use: they read the
// environment, the clock, the network or a random source, so the same inputs would not give the
// same objects. sprig's hermetic map drops some of them; the rest are listed here.
var unsafeFuncs = []string{
	"env", "expandenv", "getHostByName",
	"now", "date", "dateInZone", "date_in_zone", "dateModify", "date_modify", "mustDateModify",
	"must_date_modify", "htmlDate", "htmlDateInZone", "ago", "toDate", "mustToDate", "unixEpoch",
	"durationRound",
	"randAlphaNum", "randAlpha", "randAscii", "randNumeric", "randBytes", "randInt", "shuffle", "uuidv4",
	"genPrivateKey", "genCA", "genCAWithKey", "genSelfSignedCert", "genSelfSignedCertWithKey",
	"genSignedCert", "genSignedCertWithKey", "buildCustomCert", "encryptAES", "decryptAES",
	"bcrypt", "htpasswd", "derivePassword",
	"osBase", "osClean", "osDir", "osExt", "osIsAbs",
}

// maxIncludeDepth stops a template that includes itself before it exhausts the stack.
const maxIncludeDepth = 100

// maxTemplateErrorBytes shortens the message of a failed template: a template decides what
// `fail` and many functions put in their errors, and the message ends up in a status condition.
const maxTemplateErrorBytes = 1024

// templater executes a package's *.gotmpl files with its helper definitions, all of them within
// one budget.
type templater struct {
	helpers map[string]string // helper file path → source
	order   []string          // helper paths in walk order
	data    map[string]any
	budget  *budget
	funcs   template.FuncMap // bounded functions, without include
	// reads, when set, records what the executed templates may read of data.
	reads reads
}

// newTemplater prepares the templates of one render, which stop when ctx is done, with every
// function. extra are the functions that need the render's state (cel, the package's files);
// they are bounded like the rest.
func newTemplater(ctx context.Context, helpers map[string]string, order []string, data map[string]any, extra template.FuncMap) *templater {
	return newTemplaterUsing(ctx, helpers, order, data, extra, nil)
}

// newTemplaterFor is newTemplater for the templates of a package's tree: it binds only the
// functions whose names occur in the tree's templates and helpers (namesIn). Each of some 200
// functions costs a bounded wrapper per render and a reflected value per template, which was a
// tenth of a fleet's rendering; a template calls a function only by its written name, so one
// whose name occurs nowhere can never be called, and parsing finds an unknown name as before.
func newTemplaterFor(ctx context.Context, t *tree, data map[string]any, extra template.FuncMap) *templater {
	sources := make([]string, 0, len(t.helpers)+len(t.files))
	for _, src := range t.helpers {
		sources = append(sources, src)
	}
	for p, src := range t.files {
		if strings.HasSuffix(p, ".gotmpl") {
			sources = append(sources, src)
		}
	}
	return newTemplaterUsing(ctx, t.helpers, t.helperOrder, data, extra, func(fm template.FuncMap) map[string]bool {
		return namesIn(sources, fm)
	})
}

// newTemplaterUsing binds the functions used picks of the whole set (every one when nil).
func newTemplaterUsing(ctx context.Context, helpers map[string]string, order []string, data map[string]any, extra template.FuncMap,
	used func(template.FuncMap) map[string]bool) *templater {
	b := &budget{ctx: ctx, limits: defaultTemplateLimits}
	fm := b.unboundFuncs()
	maps.Copy(fm, extra)
	if used != nil {
		keep := used(fm)
		maps.DeleteFunc(fm, func(name string, _ any) bool { return !keep[name] })
	}
	return &templater{helpers: helpers, order: order, data: data, budget: b, funcs: b.bind(fm)}
}

// namesIn returns the names of fm that occur in sources as whole identifiers (runs of ASCII
// letters, digits and underscores, the function names of fm being ASCII): a superset of the
// functions the sources' templates call. One pass over each source, bounded by its size.
func namesIn(sources []string, fm template.FuncMap) map[string]bool {
	used := map[string]bool{}
	isName := func(c byte) bool {
		return c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
	}
	for _, src := range sources {
		for i := 0; i < len(src); {
			if !isName(src[i]) {
				i++
				continue
			}
			j := i
			for j < len(src) && isName(src[j]) {
				j++
			}
			if word := src[i:j]; !used[word] {
				if _, ok := fm[word]; ok {
					used[word] = true
				}
			}
			i = j
		}
	}
	return used
}

// bind bounds each function of fm by b, and adds the functions instrument calls.
func (b *budget) bind(fm template.FuncMap) template.FuncMap {
	for name, fn := range fm {
		fm[name] = b.bound(name, fn)
	}
	fm[tickFunc] = b.tick
	fm[printableFunc] = b.printable
	return fm
}

// unboundFuncs returns the safe function set, not bounded yet, without include.
func (b *budget) unboundFuncs() template.FuncMap {
	fm := sprig.TxtFuncMap()
	for _, name := range unsafeFuncs {
		delete(fm, name)
	}
	for name, fn := range b.regexFuncs() {
		fm[name] = fn
	}
	fm["toYAML"] = func(v any) (string, error) {
		out, err := yaml.Marshal(v)
		return strings.TrimSuffix(string(out), "\n"), err
	}
	fm["fromYAML"] = func(s string) (any, error) {
		var v any
		err := yaml.Unmarshal([]byte(s), &v)
		return v, err
	}
	// Builtins that format their arguments, overridden (functions win over builtins) to bound
	// them like the rest.
	fm["print"] = fmt.Sprint
	fm["printf"] = fmt.Sprintf
	fm["println"] = fmt.Sprintln
	fm["html"] = template.HTMLEscaper
	fm["js"] = template.JSEscaper
	fm["urlquery"] = template.URLQueryEscaper
	return fm
}

// include returns the include function of the template set *t: it executes a template of the
// set into a bounded buffer, so its output counts like the file's.
func (tp *templater) include(t **template.Template) func(string, any) (string, error) {
	depth := 0
	return func(name string, data any) (string, error) {
		if depth >= maxIncludeDepth {
			return "", fmt.Errorf("include %q: nested more than %d deep, does a template include itself?", name, maxIncludeDepth)
		}
		depth++
		defer func() { depth-- }()
		w := tp.budget.writer()
		if err := (*t).ExecuteTemplate(w, name, data); err != nil {
			return "", err
		}
		return w.String(), nil
	}
}

// newTemplate parses the helpers and then the file into one template set, so the file can
// call every helper definition with template or include.
func (tp *templater) newTemplate(file, src string) (*template.Template, *Error) {
	var t *template.Template
	t = template.New(file).Option("missingkey=error").Funcs(tp.funcs).Funcs(template.FuncMap{"include": tp.include(&t)})
	for _, h := range tp.order {
		if _, err := t.New(h).Parse(tp.helpers[h]); err != nil {
			return nil, templateError(h, err)
		}
	}
	if _, err := t.Parse(src); err != nil {
		return nil, templateError(file, err)
	}
	return t, nil
}

// execute renders one template file within the render's budget.
func (tp *templater) execute(file, src string) (string, *Error) {
	t, perr := tp.newTemplate(file, src)
	if perr != nil {
		return "", perr
	}
	if tp.reads != nil {
		analyseReads(t, file, tp.reads)
	}
	instrument(t)
	w := tp.budget.writer()
	if err := t.ExecuteTemplate(w, file, tp.data); err != nil {
		return "", templateError(file, explainMissingKey(t, file, tp.data, err))
	}
	return w.String(), nil
}

// checkHelper parses a helper on its own so a broken helper is reported once, against itself.
func (tp *templater) checkHelper(file, src string) *Error {
	var t *template.Template
	t = template.New(file).Funcs(tp.funcs).Funcs(template.FuncMap{"include": tp.include(&t)})
	if _, err := t.Parse(src); err != nil {
		return templateError(file, err)
	}
	return nil
}

// maxTemplateErrorHead bounds the part of a template's error searched for the file and line:
// room for the chain of maxIncludeDepth includes.
const maxTemplateErrorHead = 64 << 10

// templateLineRE finds "template: NAME:LINE:" in text/template errors; the innermost one
// (the last) names the line that failed.
var templateLineRE = regexp.MustCompile(`template: ([^:\s]+):(\d+):`)

func templateError(file string, err error) *Error {
	e := &Error{File: file}
	// A stop says all there is to say, and wraps the context's error for callers to tell a
	// deadline apart; the chain of includes it went through would only bury it.
	var stop *stopError
	if errors.As(err, &stop) {
		e.Err = fmt.Errorf("template: %w", stop)
	} else {
		e.Err = fmt.Errorf("template: %w", stripTemplatePrefix(err))
	}
	msg := err.Error()
	// text/template writes the chain of templates at the head; what follows is the failed
	// function's own text, up to 8 MiB of the template's choosing: only the head is searched.
	if ms := templateLineRE.FindAllStringSubmatch(msg[:min(len(msg), maxTemplateErrorHead)], maxIncludeDepth+1); len(ms) > 0 {
		m := ms[len(ms)-1]
		e.File = m[1]
		e.Line, _ = strconv.Atoi(m[2])
	}
	return e
}

// stripTemplatePrefix drops text/template's leading "template: NAME:LINE:" because Error
// prints the file and line itself.
func stripTemplatePrefix(err error) error {
	msg := err.Error()
	if loc := templateLineRE.FindStringIndex(msg); loc != nil && loc[0] == 0 {
		rest := strings.TrimLeft(msg[loc[1]:], "0123456789:")
		return errors.New(shorten(strings.TrimSpace(rest)))
	}
	if len(msg) > maxTemplateErrorBytes {
		return errors.New(shorten(msg))
	}
	return err
}

// shorten cuts msg to about maxTemplateErrorBytes, keeping its start and its end: the end holds
// the cause when includes nest.
func shorten(msg string) string {
	if len(msg) <= maxTemplateErrorBytes {
		return msg
	}
	head, tail := maxTemplateErrorBytes/4, len(msg)-maxTemplateErrorBytes*3/4
	for head > 0 && !utf8.RuneStart(msg[head]) {
		head--
	}
	for tail < len(msg) && !utf8.RuneStart(msg[tail]) {
		tail++
	}
	return msg[:head] + " … " + msg[tail:]
}

// templateData builds the context templates see, with Package Operator's names, and for
// convenience .package.name and .package.namespace.
func templateData(opts Options, images, cfg map[string]any) map[string]any {
	env := map[string]any{
		"kubernetes": map[string]any{"version": opts.Environment.KubernetesVersion},
	}
	if v := opts.Environment.OpenShiftVersion; v != "" {
		env["openShift"] = map[string]any{"version": v}
	}
	if p := opts.Environment.Proxy; p != nil {
		env["proxy"] = map[string]any{"httpProxy": p.HTTPProxy, "httpsProxy": p.HTTPSProxy, "noProxy": p.NoProxy}
	}
	if hc := opts.Environment.HostedCluster; hc != nil {
		env["hyperShift"] = map[string]any{
			"hostedCluster": map[string]any{
				"metadata": map[string]any{
					"name": hc.Name, "namespace": hc.Namespace,
					"labels": stringMap(hc.Labels), "annotations": stringMap(hc.Annotations),
				},
				"hostedClusterNamespace": hc.HostedClusterNamespace,
				"nodeSelector":           stringMap(hc.NodeSelector),
				"platform":               map[string]any{"type": hc.PlatformType},
			},
		}
	}
	return map[string]any{
		"package": map[string]any{
			"metadata": map[string]any{
				"name":        opts.Name,
				"namespace":   opts.Namespace,
				"labels":      stringMap(opts.Labels),
				"annotations": stringMap(opts.Annotations),
			},
			"name":      opts.Name,
			"namespace": opts.Namespace,
			"image":     opts.Image,
		},
		"config":      cfg,
		"images":      images,
		"environment": env,
	}
}

func stringMap(in map[string]string) map[string]any {
	out := make(map[string]any, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}
