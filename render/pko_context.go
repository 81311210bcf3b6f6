package render

import (
	"encoding/json"
	"fmt"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// pkoRenderContext is Package Operator's render context (its PackageRenderContext), field by
// field with the same JSON names and omitempty rules. Package Operator encodes it to JSON and
// decodes that into map[string]any for its templates and its CEL expressions, so what they see
// has the types of encoding/json's decoding (numbers float64, objects map[string]any) and null
// where a map or pointer is nil; pkoTemplateData does the same.
type pkoRenderContext struct {
	Package      v1alpha1.TemplateContextPackage `json:"package"`
	Config       map[string]any                  `json:"config"`
	Images       map[string]any                  `json:"images"`
	Dependencies map[string]string               `json:"dependencies"`
	Environment  v1alpha1.PackageEnvironment     `json:"environment"`
}

// pkoTemplateData builds the template context and the CEL variables of a Package Operator
// package as Package Operator builds them: its render context through JSON, and for templates
// .package.metadata.labels and .annotations made empty string maps where they are null, so that
// index of a missing key gives "" (text/template's missingkey=error does not apply to index).
// Where the Package has labels (annotations) they stay a map decoded from JSON, and index of a
// missing key gives no value, as there. An empty map counts as none, except in a test case
// (testCase), whose context Package Operator decodes as written: `annotations: {}` is a map
// there. (The API server never returns an empty map; the controller passes one when it took
// its own reconcile request annotation out, which must not change what renders.)
//
// One addition is pkgsync's: .environment.hyperShift.hostedCluster.platform.type.
func pkoTemplateData(opts Options, images, cfg map[string]any, testCase bool) (tmpl, cel map[string]any, err error) {
	if !testCase {
		if len(opts.Labels) == 0 {
			opts.Labels = nil
		}
		if len(opts.Annotations) == 0 {
			opts.Annotations = nil
		}
	}
	c := pkoRenderContext{
		Package: v1alpha1.TemplateContextPackage{
			Metadata: v1alpha1.TemplateContextObjectMeta{Name: opts.Name, Namespace: opts.Namespace, Labels: opts.Labels, Annotations: opts.Annotations},
			Image:    opts.Image,
		},
		// Package Operator always renders with a configuration and images, if empty, and
		// pkgsync refuses spec.dependencies: its dependencies are always empty.
		Config:       cfg,
		Images:       images,
		Dependencies: map[string]string{},
		Environment:  pkoEnvironmentOf(opts.Environment),
	}
	if c.Config == nil {
		c.Config = map[string]any{}
	}
	if c.Images == nil {
		c.Images = map[string]any{}
	}
	js, err := json.Marshal(c)
	if err != nil {
		return nil, nil, fmt.Errorf("encode template context: %w", err)
	}
	// Decoded twice: templates and CEL get maps of their own, as in Package Operator.
	for _, out := range []*map[string]any{&tmpl, &cel} {
		if err := json.Unmarshal(js, out); err != nil {
			return nil, nil, fmt.Errorf("decode template context: %w", err)
		}
		if hc := opts.Environment.HostedCluster; hc != nil {
			env := (*out)["environment"].(map[string]any)
			hcData := env["hyperShift"].(map[string]any)["hostedCluster"].(map[string]any)
			hcData["platform"] = map[string]any{"type": hc.PlatformType}
		}
	}
	meta := tmpl["package"].(map[string]any)["metadata"].(map[string]any)
	for _, k := range []string{"labels", "annotations"} {
		if meta[k] == nil {
			meta[k] = map[string]string{}
		}
	}
	return tmpl, cel, nil
}

// pkoEnvironmentOf is env as Package Operator's environment.
func pkoEnvironmentOf(env Environment) v1alpha1.PackageEnvironment {
	out := v1alpha1.PackageEnvironment{Kubernetes: v1alpha1.PackageEnvironmentKubernetes{Version: env.KubernetesVersion}}
	if env.OpenShiftVersion != "" || env.OpenShiftManaged != nil {
		out.OpenShift = &v1alpha1.PackageEnvironmentOpenShift{Version: env.OpenShiftVersion}
		if m := env.OpenShiftManaged; m != nil {
			out.OpenShift.Managed = &v1alpha1.PackageEnvironmentManagedOpenShift{Data: m.Data}
		}
	}
	if p := env.Proxy; p != nil {
		out.Proxy = &v1alpha1.PackageEnvironmentProxy{HTTPProxy: p.HTTPProxy, HTTPSProxy: p.HTTPSProxy, NoProxy: p.NoProxy}
	}
	if env.HyperShift || env.HostedCluster != nil {
		out.HyperShift = &v1alpha1.PackageEnvironmentHyperShift{}
	}
	if hc := env.HostedCluster; hc != nil {
		out.HyperShift.HostedCluster = &v1alpha1.PackageEnvironmentHyperShiftHostedCluster{
			Metadata:               v1alpha1.TemplateContextObjectMeta{Name: hc.Name, Namespace: hc.Namespace, Labels: hc.Labels, Annotations: hc.Annotations},
			HostedClusterNamespace: hc.HostedClusterNamespace,
			NodeSelector:           hc.NodeSelector,
		}
	}
	return out
}
