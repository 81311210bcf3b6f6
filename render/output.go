package render

import (
	"encoding/json"
	"fmt"
	"io"

	"sigs.k8s.io/yaml"
)

// WriteYAML writes the phases as one multi-document YAML stream, each phase introduced by a
// comment "# Phase N: NAME (class: management|hosted-cluster)". Keys are sorted, so the same
// result always gives the same bytes.
func (r *Result) WriteYAML(w io.Writer) error {
	for i, p := range r.Phases {
		class := p.Class
		if class == "" {
			class = "management"
		}
		if _, err := fmt.Fprintf(w, "# Phase %d: %s (class: %s)\n", i+1, p.Name, class); err != nil {
			return err
		}
		if len(p.Objects) == 0 {
			if _, err := fmt.Fprintln(w, "# (no objects)"); err != nil {
				return err
			}
		}
		for _, obj := range p.Objects {
			b, err := yaml.Marshal(obj.Object)
			if err != nil {
				return fmt.Errorf("encode %s: %w", describeObject(obj), err)
			}
			if _, err := fmt.Fprintf(w, "---\n%s", b); err != nil {
				return err
			}
		}
	}
	return nil
}

// jsonPhase is the stable JSON shape of a phase: scripts depend on it.
type jsonPhase struct {
	Name    string           `json:"name"`
	Class   string           `json:"class"`
	Objects []map[string]any `json:"objects"`
}

// WriteJSON writes {"phases":[{"name":..,"class":..,"objects":[..]}]}, class being "" for the
// management cluster and "hosted-cluster" for the hosted cluster. Scripts depend on this shape.
func (r *Result) WriteJSON(w io.Writer) error {
	out := struct {
		Phases []jsonPhase `json:"phases"`
	}{Phases: make([]jsonPhase, 0, len(r.Phases))}
	for _, p := range r.Phases {
		jp := jsonPhase{Name: p.Name, Class: p.Class, Objects: make([]map[string]any, 0, len(p.Objects))}
		for _, obj := range p.Objects {
			jp.Objects = append(jp.Objects, obj.Object)
		}
		out.Phases = append(out.Phases, jp)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
