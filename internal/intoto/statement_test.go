package intoto

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSBOMStatement: an SPDX document becomes an in-toto statement about the digest, in the
// same bytes every time; a digest that is not sha256:HEX and an SBOM that is not JSON are refused.
func TestSBOMStatement(t *testing.T) {
	t.Parallel()
	const dgst = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	sbom := []byte(`{"spdxVersion":"SPDX-2.3","name":"<pkgsync>"}`)
	first, err := SBOMStatement(sbom, "registry.example.com/pkgsync", dgst)
	require.NoError(t, err)
	again, err := SBOMStatement(sbom, "registry.example.com/pkgsync", dgst)
	require.NoError(t, err)
	assert.Equal(t, first, again, "byte for byte")
	assert.Contains(t, string(first), `"name": "<pkgsync>"`, "no HTML escaping")

	var st struct {
		Type          string `json:"_type"`
		PredicateType string `json:"predicateType"`
		Subject       []struct {
			Name   string            `json:"name"`
			Digest map[string]string `json:"digest"`
		} `json:"subject"`
	}
	require.NoError(t, json.Unmarshal(first, &st))
	assert.Equal(t, "https://in-toto.io/Statement/v1", st.Type)
	assert.Equal(t, SPDXPredicateType, st.PredicateType)
	require.Len(t, st.Subject, 1)
	assert.Equal(t, "registry.example.com/pkgsync", st.Subject[0].Name)
	assert.Equal(t, dgst[len("sha256:"):], st.Subject[0].Digest["sha256"])

	_, err = SBOMStatement(sbom, "pkgsync", "md5:abc")
	assert.ErrorContains(t, err, `image digest "md5:abc" is not sha256:HEX`)
	_, err = SBOMStatement([]byte("not json"), "pkgsync", dgst)
	assert.ErrorContains(t, err, "the SBOM is not JSON")
}

// TestCanonical: keys sorted, two-space indentation, no HTML escaping, a final newline.
func TestCanonical(t *testing.T) {
	t.Parallel()
	out, err := Canonical([]byte(`{"b":1,"a":{"d":"<x>","c":2.50}}`))
	require.NoError(t, err)
	assert.Equal(t, "{\n  \"a\": {\n    \"c\": 2.50,\n    \"d\": \"<x>\"\n  },\n  \"b\": 1\n}\n", string(out))
}
