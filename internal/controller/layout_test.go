package controller

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// floorOf says which floor a file of this package is on (doc.go draws them): a kind's own files
// (package_*, objectdeployment_*, fleet_*), the apply floor of the kinds that apply objects
// (apply_*), or the shared lifecycle every kind runs (every other file).
func floorOf(file string) string {
	for _, prefix := range []string{"package_", "objectdeployment_", "fleet_", "apply_"} {
		if strings.HasPrefix(file, prefix) {
			return strings.TrimSuffix(prefix, "_")
		}
	}
	return "shared"
}

// mayUse says whether code on floor from may refer to what floor to declares: a kind uses the
// floors below it and never another kind; the apply floor uses the shared one; the shared floor
// uses nothing above it, except that setup.go, where Setup wires the kinds, names the apply
// floor's constructor and each kind's setup function.
func mayUse(fromFile, from, to, name string) bool {
	switch {
	case from == to || to == "shared":
		return true
	case to == "apply":
		return from != "shared" || fromFile == "setup.go" || fromFile == "services.go"
	}
	return fromFile == "setup.go" && strings.HasPrefix(name, "setup")
}

// TestFloors keeps the layout: no file refers to a helper declared in another kind's file, and
// the shared floors refer to nothing above them. References are read from the syntax: an
// identifier a file does not declare itself is the package-level declaration of that name.
func TestFloors(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	parsed := map[string]*ast.File{}
	declaredIn := map[string]string{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		parsed[name] = f
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					declaredIn[d.Name.Name] = name
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						declaredIn[s.Name.Name] = name
					case *ast.ValueSpec:
						for _, n := range s.Names {
							declaredIn[n.Name] = name
						}
					}
				}
			}
		}
	}
	require.Contains(t, declaredIn, "setupPackages", "the test reads this package's files")
	for name, f := range parsed {
		for _, id := range f.Unresolved {
			def, ok := declaredIn[id.Name]
			if !ok || def == name {
				continue
			}
			assert.True(t, mayUse(name, floorOf(name), floorOf(def), id.Name),
				"%s (%s) refers to %s of %s (%s): move it to a file of the floor both use", fset.Position(id.Pos()), floorOf(name), id.Name, def, floorOf(def))
		}
	}
}
