package render

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig/v3"
	"sigs.k8s.io/yaml"

	"pkgsync.dev/pkgsync/api/v1alpha1"
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

// templater executes a package's *.gotmpl files with its helper definitions.
type templater struct {
	helpers map[string]string // helper file path → source
	order   []string          // helper paths in walk order
	data    map[string]any
}

// funcs returns the safe function set; include executes templates of t.
func funcs(t **template.Template) template.FuncMap {
	fm := sprig.TxtFuncMap()
	for _, name := range unsafeFuncs {
		delete(fm, name)
	}
	depth := 0
	fm["include"] = func(name string, data any) (string, error) {
		if depth >= maxIncludeDepth {
			return "", fmt.Errorf("include %q: nested more than %d deep, does a template include itself?", name, maxIncludeDepth)
		}
		depth++
		defer func() { depth-- }()
		var buf bytes.Buffer
		if err := (*t).ExecuteTemplate(&buf, name, data); err != nil {
			return "", err
		}
		return buf.String(), nil
	}
	fm["toYAML"] = func(v any) (string, error) {
		b, err := yaml.Marshal(v)
		return strings.TrimSuffix(string(b), "\n"), err
	}
	fm["fromYAML"] = func(s string) (any, error) {
		var v any
		err := yaml.Unmarshal([]byte(s), &v)
		return v, err
	}
	return fm
}

// newTemplate parses the helpers and then the file into one template set, so the file can
// call every helper definition with template or include.
func (tp *templater) newTemplate(file, src string) (*template.Template, *Error) {
	var t *template.Template
	t = template.New(file).Option("missingkey=error").Funcs(funcs(&t))
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

// execute renders one template file.
func (tp *templater) execute(file, src string) (string, *Error) {
	t, perr := tp.newTemplate(file, src)
	if perr != nil {
		return "", perr
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, file, tp.data); err != nil {
		return "", templateError(file, err)
	}
	return buf.String(), nil
}

// checkHelper parses a helper on its own so a broken helper is reported once, against itself.
func checkHelper(file, src string) *Error {
	var t *template.Template
	t = template.New(file).Funcs(funcs(&t))
	if _, err := t.Parse(src); err != nil {
		return templateError(file, err)
	}
	return nil
}

// templateLineRE finds "template: NAME:LINE:" in text/template errors; the innermost one
// (the last) names the line that failed.
var templateLineRE = regexp.MustCompile(`template: ([^:\s]+):(\d+):`)

func templateError(file string, err error) *Error {
	e := &Error{File: file, Err: fmt.Errorf("template: %w", stripTemplatePrefix(err))}
	if ms := templateLineRE.FindAllStringSubmatch(err.Error(), -1); len(ms) > 0 {
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
		return errors.New(strings.TrimSpace(rest))
	}
	return err
}

// templateData builds the context templates see, with Package Operator's names, and for
// convenience .package.name and .package.namespace.
func templateData(opts Options, m *v1alpha1.PackageManifest, cfg map[string]any) map[string]any {
	images := map[string]any{}
	for _, img := range m.Spec.Images {
		images[img.Name] = img.Image
	}
	env := map[string]any{
		"kubernetes": map[string]any{"version": opts.Environment.KubernetesVersion},
	}
	if hc := opts.Environment.HostedCluster; hc != nil {
		env["hyperShift"] = map[string]any{
			"hostedCluster": map[string]any{
				"metadata":               map[string]any{"name": hc.Name, "namespace": hc.Namespace},
				"hostedClusterNamespace": hc.HostedClusterNamespace,
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
