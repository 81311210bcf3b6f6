package render

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// componentsDir holds the components of a multi-component package, one directory each.
const componentsDir = "components"

// component is a package root chosen for a render: the root package, or one of its components.
type component struct {
	fsys fs.FS
	// prefix is the component's directory with a trailing slash, "" for the root package:
	// errors name files by their path in the package.
	prefix string
	// skipComponents is set for the root of a multi-component package: components/ is not part
	// of the root component.
	skipComponents bool
}

// selectComponent picks what a render renders: the root package when name is empty,
// otherwise components/NAME of a package whose root manifest enables spec.components.
func selectComponent(fsys fs.FS, name string) (component, Errors) {
	root, file, _, errs := readManifestFormat(fsys)
	if root == nil {
		return component{}, errs
	}
	enabled := root.Spec.Components != nil
	if name == "" {
		return component{fsys: fsys, skipComponents: enabled}, nil
	}
	if !enabled {
		return component{}, Errors{&Error{File: file, Field: "spec.components", Err: fmt.Errorf(
			"component %q requested, but the package is not a multi-component package: its manifest does not set spec.components", name)}}
	}
	names, errs := componentNames(fsys)
	if len(errs) > 0 {
		return component{}, errs
	}
	if !slices.Contains(names, name) {
		return component{}, Errors{&Error{File: componentsDir + "/", Err: fmt.Errorf("no component %q: the package has %s", name, listOrNone(names))}}
	}
	dir := path.Join(componentsDir, name)
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		return component{}, Errors{&Error{File: dir, Err: fmt.Errorf("open component: %w", err)}}
	}
	c := component{fsys: sub, prefix: dir + "/"}
	m, _, _, errs := readManifestFormat(sub)
	if m == nil {
		return component{}, c.rebase(errs)
	}
	if m.Spec.Components != nil {
		return component{}, c.rebase(Errors{&Error{File: "manifest.yaml", Field: "spec.components", Err: errors.New(
			"components nest only one level: a component cannot have components of its own")}})
	}
	return c, nil
}

// componentNames lists the components of a multi-component package and checks the layout:
// components/ holds only directories, each named like a Kubernetes label (a DNS-1123 label)
// and holding a manifest.
func componentNames(fsys fs.FS) ([]string, Errors) {
	entries, err := fs.ReadDir(fsys, componentsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, Errors{&Error{File: componentsDir + "/", Err: fmt.Errorf("read components: %w", err)}}
	}
	var names []string
	var errs Errors
	for _, e := range entries {
		p := path.Join(componentsDir, e.Name())
		switch {
		case strings.HasPrefix(e.Name(), "."):
			continue
		case !e.IsDir():
			errs = append(errs, &Error{File: p, Err: errors.New("components/ holds one directory per component, not files")})
			continue
		}
		if msgs := validation.IsDNS1123Label(e.Name()); len(msgs) > 0 {
			errs = append(errs, &Error{File: p + "/", Err: fmt.Errorf("invalid component name %q: %s", e.Name(), strings.Join(msgs, "; "))})
			continue
		}
		found := false
		for _, n := range manifestFiles {
			if _, err := fs.Stat(fsys, path.Join(p, n)); err == nil {
				found = true
			}
		}
		if !found {
			errs = append(errs, &Error{File: p + "/manifest.yaml", Err: errors.New("missing: every component needs its own manifest.yaml")})
			continue
		}
		names = append(names, e.Name())
	}
	return names, errs
}

// rebase makes the file names of errors relative to the package rather than the component.
func (c component) rebase(errs Errors) Errors {
	if c.prefix == "" {
		return errs
	}
	for _, err := range errs {
		var e *Error
		if errors.As(err, &e) && e.File != "" && !strings.HasPrefix(e.File, c.prefix) {
			e.File = c.prefix + e.File
		}
	}
	return errs
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
