package render

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FuzzParseObjects feeds arbitrary files to the object parser: it must never panic, and every
// problem it reports must point at a document and a line inside the file.
func FuzzParseObjects(f *testing.F) {
	for _, seed := range []string{
		"",
		"---",
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
		"a: b\n---\n- x\n---\nkind: [\n",
		"apiVersion: v1\nkind: X\nmetadata: {name: a, annotations: {x: 1}}\n",
		"--- # comment\napiVersion: v1\r\nkind: X\r\nmetadata: {name: a}\r\n...\n",
		"key: &a [*a]\n",
		"apiVersion: v1\nkind: X\nmetadata:\n  name: a\n  name: b\n",
		"\t\tbad indent: [",
		"null\n---\n~\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data string) {
		for _, keys := range []keyRule{repeatedKeyRefused, repeatedKeyReplaces} {
			objs, errs := parseObjects("f.yaml", data, keys)
			lines := strings.Count(data, "\n") + 1
			docs := len(splitDocuments(data))
			for _, e := range errs {
				require.Equal(t, "f.yaml", e.File)
				assert.True(t, e.Document >= 1 && e.Document <= docs, "document %d of %d: %v", e.Document, docs, e)
				assert.True(t, e.Line >= 1, "line %d: %v", e.Line, e)
				assert.NotEmpty(t, e.Error())
			}
			for _, o := range objs {
				assert.True(t, o.doc.startLine >= 1 && o.doc.startLine <= lines, "line %d of %d", o.doc.startLine, lines)
				// A field's line, when found, is one of the object's document.
				if n := o.doc.fieldLine("metadata.name"); n != 0 {
					assert.True(t, n >= o.doc.startLine && n <= lines, "metadata.name at line %d of %d, document from %d", n, lines, o.doc.startLine)
				}
				assert.NotEmpty(t, o.obj.GetName())
				assert.NotEmpty(t, o.obj.GetKind())
			}
		}
	})
}

func TestSplitDocumentsLines(t *testing.T) {
	t.Parallel()
	docs := splitDocuments("a: 1\n---\nb: 2\nc: 3\n--- # x\n---\nd: 4")
	require.Len(t, docs, 4)
	assert.Equal(t, []int{1, 3, 6, 7}, []int{docs[0].startLine, docs[1].startLine, docs[2].startLine, docs[3].startLine})
	assert.Equal(t, "b: 2\nc: 3\n", docs[1].body)
	assert.False(t, isSeparator("----\n"))
	assert.True(t, isSeparator("---\r\n"))
}
