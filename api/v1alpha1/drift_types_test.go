package v1alpha1

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseJSONPointer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want []string
		err  string
	}{
		{in: "/spec/replicas", want: []string{"spec", "replicas"}},
		{in: "/metadata/annotations/example.com~1v", want: []string{"metadata", "annotations", "example.com/v"}},
		{in: "/data/a~0b", want: []string{"data", "a~b"}},
		{in: "/webhooks/0/clientConfig/caBundle", want: []string{"webhooks", "0", "clientConfig", "caBundle"}},
		{in: "", err: "whole object"},
		{in: "spec/replicas", err: "must start with /"},
		{in: "/spec/~2", err: "~ must be followed by 0"},
		{in: "/spec//x", err: "empty reference token"},
		{in: "/kind", err: "type"},
		{in: "/metadata/labels", err: "ownership labels"},
		{in: "/metadata/labels/pkgsync.dev~1owner-name", err: "pkgsync's own"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseJSONPointer(tc.in)
			if tc.err != "" {
				assert.ErrorContains(t, err, tc.err)
				return
			}
			assert.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestValidateIgnoreFieldsNamesThePlace(t *testing.T) {
	t.Parallel()
	err := ValidateIgnoreFields("spec.ignoreFields", []IgnoreFields{
		{Kind: "Deployment", JSONPointers: []string{"/spec/replicas"}},
		{Kind: "Service", JSONPointers: []string{"/spec/ports", "spec"}},
	})
	assert.ErrorContains(t, err, "spec.ignoreFields[1].jsonPointers[1]: ")
	assert.NotContains(t, err.Error(), "[0]")
}
