package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/render"
)

// pkoGroup is the API group of Package Operator's resources.
const pkoGroup = "package-operator.run"

func newConvertCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "convert [FILE...]",
		Short: "Print pkgsync's equivalents of Package Operator resources",
		Long: `Convert reads Package Operator's Package, ClusterPackage, ObjectDeployment,
ClusterObjectDeployment and HostedClusterPackage manifests (YAML or JSON, several documents per
file; from the files given, or stdin when none or "-" is given) and prints pkgsync's
equivalents on stdout, one YAML document each. Every field that has no equivalent is named on
stderr with what to do instead; status is dropped. Exits 1 when a document is not one of those
kinds, or when its apiVersion, kind, name, namespace or a label or annotation value is a boolean:
read as kubectl reads YAML (1.1), y, n, on, off, yes and no are booleans; quote them.`,
		Example: `  pkgsync convert package.yaml > pkgsync-package.yaml
  kubectl get packages.package-operator.run -A -o yaml | pkgsync convert`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				args = []string{"-"}
			}
			var out []map[string]any
			for _, file := range args {
				docs, err := readDocuments(cmd.InOrStdin(), file)
				if err != nil {
					return exitCodeError{code: 1, err: fmt.Errorf("convert: %w", err)}
				}
				for i, doc := range docs {
					where := fmt.Sprintf("%s (document %d)", file, i+1)
					// Read as kubectl and Package Operator read it (YAML 1.1), `namespace: y`
					// is true: refused, as render refuses it, rather than printed as true or
					// guessed back into a string.
					if err := render.BooleanFields(doc); err != nil {
						return exitCodeError{code: 1, err: fmt.Errorf("convert %s: %w", where, err)}
					}
					converted, notes, err := convertPKO(doc)
					if err != nil {
						return exitCodeError{code: 1, err: fmt.Errorf("convert %s: %w", where, err)}
					}
					for _, n := range notes {
						fmt.Fprintf(cmd.ErrOrStderr(), "%s: %s\n", where, n)
					}
					out = append(out, converted...)
				}
			}
			w := yamlOutput(cmd)
			for _, obj := range out {
				b, err := yaml.Marshal(obj)
				if err != nil {
					return err
				}
				fmt.Fprintf(w, "---\n%s", b)
			}
			return nil
		},
	}
}

// readDocuments reads the objects of a YAML or JSON stream; a List's items are its objects.
func readDocuments(stdin io.Reader, file string) ([]map[string]any, error) {
	r := stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bufio.NewReader(r), 4096)
	var docs []map[string]any
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if doc == nil {
			continue
		}
		if items, ok := doc["items"].([]any); ok && strings.HasSuffix(str(doc, "kind"), "List") {
			for _, it := range items {
				if m, ok := it.(map[string]any); ok {
					docs = append(docs, m)
				}
			}
			continue
		}
		docs = append(docs, doc)
	}
}

// convertPKO converts one Package Operator object; notes name what has no equivalent.
func convertPKO(doc map[string]any) ([]map[string]any, []string, error) {
	gv, err := schema.ParseGroupVersion(str(doc, "apiVersion"))
	if err != nil {
		return nil, nil, err
	}
	kind := str(doc, "kind")
	if gv.Group != pkoGroup {
		return nil, nil, fmt.Errorf("%s %s is not a Package Operator resource (%s)", str(doc, "apiVersion"), kind, pkoGroup)
	}
	meta, _ := doc["metadata"].(map[string]any)
	c := &converter{subject: kind + " " + objectName(meta)}
	spec, _ := doc["spec"].(map[string]any)
	var outSpec map[string]any
	switch kind {
	case "Package", "ClusterPackage":
		outSpec = c.packageSpec("spec", spec)
	case "ObjectDeployment", "ClusterObjectDeployment":
		outSpec = c.objectDeploymentSpec(spec)
	case "HostedClusterPackage":
		outSpec = c.hostedClusterPackageSpec(spec)
	default:
		return nil, nil, fmt.Errorf("kind %s has no pkgsync equivalent: convert takes Package, ClusterPackage, ObjectDeployment, ClusterObjectDeployment and HostedClusterPackage", kind)
	}
	out := map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(),
		"kind":       kind,
		"metadata":   c.metadata(meta),
		"spec":       outSpec,
	}
	return []map[string]any{out}, c.notes, nil
}

type converter struct {
	subject string
	notes   []string
}

func (c *converter) none(field, why string) {
	c.notes = append(c.notes, fmt.Sprintf("%s: %s: no equivalent: %s", c.subject, field, why))
}

// rest reports every field of in that is not in known.
func (c *converter) rest(prefix string, in map[string]any, known ...string) {
	keys := make([]string, 0, len(in))
	for k := range in {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !slices.Contains(known, k) {
			c.none(prefix+"."+k, "pkgsync has no such field; dropped")
		}
	}
}

func (c *converter) metadata(in map[string]any) map[string]any {
	out := map[string]any{}
	for _, k := range []string{"name", "namespace", "labels", "annotations"} {
		if v, ok := in[k]; ok {
			out[k] = v
		}
	}
	return out
}

func (c *converter) packageSpec(prefix string, in map[string]any) map[string]any {
	out := map[string]any{}
	for _, k := range []string{"image", "config", "component"} {
		if v, ok := in[k]; ok {
			out[k] = v
		}
	}
	c.rest(prefix, in, "image", "config", "component")
	return out
}

func (c *converter) objectDeploymentSpec(in map[string]any) map[string]any {
	c.rest("spec", in, "template", "revisionHistoryLimit", "selector", "paused")
	if _, ok := in["revisionHistoryLimit"]; ok {
		c.none("spec.revisionHistoryLimit", "pkgsync keeps no revisions of an ObjectDeployment; its status records the last applied one")
	}
	if _, ok := in["selector"]; ok {
		c.none("spec.selector", "pkgsync selects the objects of an ObjectDeployment by its own ownership labels")
	}
	if _, ok := in["paused"]; ok {
		c.none("spec.paused", "use spec.suspend")
	}
	tmpl, _ := in["template"].(map[string]any)
	c.rest("spec.template", tmpl, "metadata", "spec")
	if _, ok := tmpl["metadata"]; ok {
		c.none("spec.template.metadata", "pkgsync labels objects with its own ownership labels")
	}
	ts, _ := tmpl["spec"].(map[string]any)
	c.rest("spec.template.spec", ts, "phases", "availabilityProbes", "successDelaySeconds")
	if _, ok := ts["successDelaySeconds"]; ok {
		c.none("spec.template.spec.successDelaySeconds", "an ObjectDeployment is Ready as soon as every object is available")
	}
	outSpec := map[string]any{}
	if probes, ok := ts["availabilityProbes"]; ok {
		outSpec["availabilityProbes"] = probes
	}
	var phases []any
	list, _ := ts["phases"].([]any)
	for i, p := range list {
		pm, _ := p.(map[string]any)
		field := fmt.Sprintf("spec.template.spec.phases[%d]", i)
		c.rest(field, pm, "name", "class", "objects", "externalObjects")
		if _, ok := pm["externalObjects"]; ok {
			c.none(field+".externalObjects", "pkgsync applies every object it is given and cannot only observe one")
		}
		op := map[string]any{"name": pm["name"]}
		if class, ok := pm["class"].(string); ok && class != "" && class != "default" {
			op["class"] = class
		}
		var objects []any
		objs, _ := pm["objects"].([]any)
		for j, o := range objs {
			om, _ := o.(map[string]any)
			of := fmt.Sprintf("%s.objects[%d]", field, j)
			c.rest(of, om, "object", "conditionMappings", "collisionProtection")
			if _, ok := om["conditionMappings"]; ok {
				c.none(of+".conditionMappings", "an ObjectDeployment does not map object conditions; a package's object can, with the package-operator.run/condition-map annotation")
			}
			if _, ok := om["collisionProtection"]; ok {
				c.none(of+".collisionProtection", "set spec.adoptionPolicy (Never or Always) for the whole ObjectDeployment")
			}
			objects = append(objects, map[string]any{"object": om["object"]})
		}
		if objects != nil {
			op["objects"] = objects
		}
		phases = append(phases, op)
	}
	outSpec["phases"] = phases
	return map[string]any{"template": map[string]any{"spec": outSpec}}
}

func (c *converter) hostedClusterPackageSpec(in map[string]any) map[string]any {
	c.rest("spec", in, "strategy", "hostedClusterSelector", "template", "partition")
	out := map[string]any{}
	if sel, ok := in["hostedClusterSelector"]; ok {
		out["hostedClusterSelector"] = sel
	}
	tmpl, _ := in["template"].(map[string]any)
	c.rest("spec.template", tmpl, "metadata", "spec")
	ts, _ := tmpl["spec"].(map[string]any)
	outTmpl := map[string]any{"spec": c.packageSpec("spec.template.spec", ts)}
	if tm, ok := tmpl["metadata"].(map[string]any); ok {
		m := map[string]any{}
		for _, k := range []string{"labels", "annotations"} {
			if v, ok := tm[k]; ok {
				m[k] = v
			}
		}
		c.rest("spec.template.metadata", tm, "labels", "annotations")
		outTmpl["metadata"] = m
	}
	out["template"] = outTmpl

	rollout := map[string]any{}
	strategy, _ := in["strategy"].(map[string]any)
	c.rest("spec.strategy", strategy, "instant", "rollingUpgrade")
	if _, ok := strategy["instant"]; ok {
		rollout["maxUnavailable"] = "100%" // every member at once
	}
	if ru, ok := strategy["rollingUpgrade"].(map[string]any); ok {
		c.rest("spec.strategy.rollingUpgrade", ru, "maxUnavailable")
		if mu, ok := ru["maxUnavailable"]; ok {
			rollout["maxUnavailable"] = mu
		}
	}
	if part, ok := in["partition"].(map[string]any); ok {
		c.rest("spec.partition", part, "labelKey", "order")
		p := map[string]any{"labelKey": part["labelKey"]}
		if order, ok := part["order"].(map[string]any); ok {
			c.rest("spec.partition.order", order, "static", "alphanumericAsc")
			o := map[string]any{}
			if st, ok := order["static"]; ok {
				o["static"] = st
			}
			if _, ok := order["alphanumericAsc"]; ok {
				o["alphanumeric"] = map[string]any{}
			}
			p["order"] = o
		}
		rollout["partitions"] = p
	}
	if len(rollout) > 0 {
		out["rollout"] = rollout
	}
	return out
}

func objectName(meta map[string]any) string {
	if ns := str(meta, "namespace"); ns != "" {
		return ns + "/" + str(meta, "name")
	}
	return str(meta, "name")
}

func str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}
