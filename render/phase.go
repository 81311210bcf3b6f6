package render

import (
	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/desired"
)

// Result is a rendered package.
type Result struct {
	// Manifest is the package's manifest, converted to pkgsync's own format when the package
	// was written for Package Operator.
	Manifest *v1alpha1.PackageManifest
	// Phases in the order they are applied, every phase of the manifest present even when empty.
	Phases []desired.Phase
	// Config is the configuration after pruning and defaulting.
	Config map[string]any
	// Inputs says which per-resource parts of Options the render read: renders of the same
	// package, configuration and cluster-wide environment that agree on these are identical.
	Inputs Inputs
	// Warnings are what the render did that its user may not expect and that did not stop it:
	// configuration keys the schema does not declare, dropped.
	Warnings []Warning
	// Files is set by RenderTestCase only: every YAML file of the package that holds objects,
	// as rendered.
	Files []File
	// NotChecked is set by RenderTestCase only, for a case whose objects are checked: the kinds
	// ("example.com/v1 Widget") there was no schema for, as Validation.NotChecked.
	NotChecked []string
}

// File is a YAML file of a package as rendered: a template's output under its name without
// .gotmpl, a plain file as written. Documents a condition leaves out are removed (the others
// joined by "---" lines); a file left with none is not a File.
type File struct {
	// Path in the package (of the component), for example deploy/app.yaml.
	Path string
	// Content as rendered.
	Content string
}
