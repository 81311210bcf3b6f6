package lint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// waitFuncs are the functions whose condition runs in another goroutine: testify's waits and
// the e2e package's wrappers of EventuallyWithT.
var waitFuncs = map[string]bool{
	"Eventually": true, "EventuallyWithT": true, "Never": true, "eventually": true, "eventuallyWithin": true,
}

// allowedUses are the methods of the test's t a condition may call: they neither fail nor end
// the test.
var allowedUses = map[string]bool{"Context": true, "Name": true}

// outerTUses returns, for each wait in src whose condition uses the test's t other than through
// allowedUses (reporting to it, or handing it to a helper that may), the position of that use.
// The condition runs in another goroutine: a failure reported to the test's t there fails the
// test at the first transient error, or is lost, instead of making the wait try again.
func outerTUses(fset *token.FileSet, file *ast.File) []token.Position {
	var found []token.Position
	ast.Inspect(file, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) == 0 || !waitFuncs[calleeName(call.Fun)] {
			return true
		}
		outer, ok := call.Args[0].(*ast.Ident)
		if !ok {
			return true
		}
		for _, arg := range call.Args[1:] {
			if lit, ok := arg.(*ast.FuncLit); ok && !declares(lit, outer.Name) {
				for _, pos := range uses(lit.Body, outer.Name) {
					found = append(found, fset.Position(pos))
				}
			}
		}
		return true
	})
	return found
}

func calleeName(fun ast.Expr) string {
	switch f := fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		return f.Sel.Name
	}
	return ""
}

// declares reports whether a function literal has a parameter of that name, which shadows it.
func declares(lit *ast.FuncLit, name string) bool {
	for _, field := range lit.Type.Params.List {
		for _, n := range field.Names {
			if n.Name == name {
				return true
			}
		}
	}
	return false
}

// uses returns the positions where body refers to name other than as name.Context() or
// name.Name(), skipping function literals that declare their own name.
func uses(body ast.Node, name string) []token.Pos {
	allowed := map[*ast.Ident]bool{}
	var found []token.Pos
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			return !declares(n, name)
		case *ast.SelectorExpr:
			if id, ok := n.X.(*ast.Ident); ok && id.Name == name && allowedUses[n.Sel.Name] {
				allowed[id] = true
			}
		case *ast.Ident:
			if n.Name == name && !allowed[n] {
				found = append(found, n.Pos())
			}
		}
		return true
	})
	return found
}

func TestOuterTUsesFindsTheMistake(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body string
		want       int
	}{
		// The bad conditions live in testdata, so that this file holds none of them itself.
		{"require on the test's t", "@require-on-outer-t.txt", 1},
		{"helper given the test's t", "@helper-given-outer-t.txt", 1},
		{"e2e wrapper", "@e2e-wrapper.txt", 1},
		{"t.Fatal", "@fatal.txt", 1},
		{"its context and name", `require.EventuallyWithT(t, func(ct *assert.CollectT) { assert.NoError(ct, c.Get(t.Context(), k, &o), t.Name()) }, d, d)`, 0},
		{"the collector", `eventually(t, func(a *attempt) { readyCondition(a, pkg); assert.True(a, exists(a, c, "x")) })`, 0},
		{"a condition that shadows t", "@shadowed-t.txt", 0},
		{"outside a wait", `require.NoError(t, err); assert.True(t, exists(t, c, "x"))`, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body := tc.body
			if name, ok := strings.CutPrefix(body, "@"); ok {
				b, err := os.ReadFile(filepath.Join("testdata", name))
				require.NoError(t, err)
				body = string(b)
			}
			fset := token.NewFileSet()
			file, err := parser.ParseFile(fset, "x_test.go", "package x\nfunc f() {\n"+body+"\n}\n", 0)
			require.NoError(t, err)
			assert.Len(t, outerTUses(fset, file), tc.want)
		})
	}
}

// TestWaitConditionsReportToTheirCollector checks every test file of the module: no wait's
// condition reports to, or hands helpers, the test's own t.
func TestWaitConditionsReportToTheirCollector(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(root, "go.mod"))
	require.NoError(t, err, "the module root is two levels up")
	fset := token.NewFileSet()
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "bin" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		file, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		files++
		for _, pos := range outerTUses(fset, file) {
			rel, _ := filepath.Rel(root, pos.Filename)
			t.Errorf("%s:%d: a wait's condition uses the test's t: report to its *assert.CollectT (or the e2e attempt) instead", rel, pos.Line)
		}
		return nil
	})
	require.NoError(t, err)
	assert.Greater(t, files, 50, "the test files of the module were found")
}
