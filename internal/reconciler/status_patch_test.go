package reconciler

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMergePatchTurnsBeforeIntoAfter: applied to before (by evanphx/json-patch, as the API
// server applies it), the patch mergePatch computes gives after, for hand-picked pairs and for
// random ones; and it is as small as the library's own (CreateMergePatch).
func TestMergePatchTurnsBeforeIntoAfter(t *testing.T) {
	t.Parallel()
	pairs := [][2]map[string]any{
		{{}, {}},
		{{"a": "x"}, {"a": "x"}},
		{{"a": "x"}, {"a": "y"}},
		{{"a": "x"}, {}},
		{{}, {"a": map[string]any{"b": int64(1)}}},
		{{"a": map[string]any{"b": int64(1), "c": "k"}}, {"a": map[string]any{"b": int64(2), "c": "k"}}},
		{{"a": map[string]any{"b": int64(1)}}, {"a": "scalar now"}},
		{{"a": []any{"x", "y"}}, {"a": []any{"x"}}},
		{{"a": nil}, {}},
		{{"metadata": map[string]any{"finalizers": []any{"f"}}}, {"metadata": map[string]any{}}},
		{{"status": map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "False"}}}},
			{"status": map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True"}}, "observedGeneration": int64(2)}}},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		pairs = append(pairs, [2]map[string]any{randomDoc(rng, 3), randomDoc(rng, 3)})
	}
	for i, pair := range pairs {
		before, after := pair[0], pair[1]
		patch, err := json.Marshal(mergePatch(before, after))
		require.NoError(t, err)
		beforeJSON, err := json.Marshal(before)
		require.NoError(t, err)
		afterJSON, err := json.Marshal(after)
		require.NoError(t, err)
		got, err := jsonpatch.MergePatch(beforeJSON, patch)
		require.NoError(t, err)
		assert.JSONEq(t, string(withoutNulls(t, afterJSON)), string(withoutNulls(t, got)), "pair %d: %s + %s", i, beforeJSON, patch)
		theirs, err := jsonpatch.CreateMergePatch(beforeJSON, afterJSON)
		require.NoError(t, err)
		assert.LessOrEqual(t, len(patch), len(theirs), "pair %d: ours %s, theirs %s", i, patch, theirs)
	}
}

// withoutNulls drops the keys whose value is null, as applying a merge patch does.
func withoutNulls(t *testing.T, doc []byte) []byte {
	t.Helper()
	out, err := jsonpatch.MergePatch([]byte("{}"), doc)
	require.NoError(t, err)
	return out
}

func randomDoc(rng *rand.Rand, depth int) map[string]any {
	doc := map[string]any{}
	for i := range rng.IntN(4) {
		key := fmt.Sprintf("k%d", (i+rng.IntN(3))%4)
		switch v := rng.IntN(6); {
		case v == 0 && depth > 0:
			doc[key] = randomDoc(rng, depth-1)
		case v == 1:
			doc[key] = []any{fmt.Sprint(rng.IntN(2))}
		case v == 2:
			doc[key] = int64(rng.IntN(3))
		case v == 3:
			doc[key] = nil
		default:
			doc[key] = fmt.Sprint(rng.IntN(3))
		}
	}
	return doc
}
