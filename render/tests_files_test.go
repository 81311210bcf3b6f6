package render

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A file some of whose documents a condition leaves out is written to a test case's fixtures as
// Package Operator's template test writes it: split on lines that are exactly "---" (leading and
// trailing "-" and newlines trimmed off the file first), each document trimmed of surrounding
// space, the left-out ones dropped, the rest joined with "\n---\n" and ended with a newline.
// Package Operator drops documents by the index of the object among the file's objects, which
// is another document when a document without an object comes first; its fixtures show that,
// and so do pkgsync's.
func TestTestCaseFilesAsPackageOperatorWritesThem(t *testing.T) {
	t.Parallel()
	cm := func(name, cond string) string {
		s := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n  annotations:\n    package-operator.run/phase: deploy\n"
		if cond != "" {
			s += "    package-operator.run/condition: '" + cond + "'\n"
		}
		return s
	}
	tests := []struct {
		name, file string
		want       string // "" when no fixture file
	}{
		{"nothing left out: as rendered", "\n\n" + cm("a", "") + "---\n\n" + cm("b", "true") + "\n", "\n\n" + cm("a", "") + "---\n\n" + cm("b", "true") + "\n"},
		{"one left out", "---\n\n" + cm("a", "") + "\n---\n" + cm("b", "false") + "---\n" + cm("c", "") + "\n\n", cm("a", "") + "---\n" + cm("c", "")},
		{"all left out", cm("a", "false") + "---\n" + cm("b", "false"), ""},
		{"a document without an object first", "# a comment\n---\n" + cm("a", "false") + "---\n" + cm("b", ""), cm("a", "false") + "---\n" + cm("b", "")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fsys := pkoPackage("[{name: deploy}]", map[string]string{"cms.yaml": tt.file})
			res, err := RenderTestCase(t.Context(), fsys, TestCase{Name: "c"})
			require.NoError(t, err)
			if tt.want == "" {
				assert.Empty(t, res.Files)
				return
			}
			require.Len(t, res.Files, 1)
			assert.Equal(t, File{Path: "cms.yaml", Content: tt.want}, res.Files[0])
		})
	}
}
