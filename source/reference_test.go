package source

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseReference(t *testing.T) {
	t.Parallel()
	const dgst = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	tests := []struct {
		in      string
		want    Reference
		wantErr string
	}{
		{in: "127.0.0.1:5000/pkg:v1", want: Reference{Registry: "127.0.0.1:5000", Repository: "pkg", Tag: "v1"}},
		{in: "registry.example.com/team/pkg@" + dgst, want: Reference{Registry: "registry.example.com", Repository: "team/pkg", Digest: dgst}},
		{in: "localhost/pkg:v1@" + dgst, want: Reference{Registry: "localhost", Repository: "pkg", Tag: "v1", Digest: dgst}},
		{in: "registry.example.com/pkg", want: Reference{Registry: "registry.example.com", Repository: "pkg"}},
		{in: "pkg:v1", wantErr: "names the registry host"},
		{in: "registry.example.com/pkg@sha256:short", wantErr: "invalid digest"},
		{in: "registry.example.com/PKG:v1", wantErr: "repository names are lower-case: registry.example.com/pkg:v1"},
		{in: "registry.example.com/Team/Pkg", wantErr: "repository names are lower-case: registry.example.com/team/pkg"},
		{in: "Registry.Example.com:5000/Team/Pkg:V1", wantErr: "repository names are lower-case: Registry.Example.com:5000/team/pkg:V1"},
		{in: "registry.example.com/team//pkg:v1", wantErr: "a repository is path components of lower-case letters and digits"},
		{in: "registry.example.com/team/pkg:-v1", wantErr: "a tag is at most 128 letters, digits"},
		{in: "127.0.0.1:5000/Pkg:v1", wantErr: "lower-case"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseReference(tt.in)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				if tt.in != "pkg:v1" {
					assert.NotContains(t, err.Error(), "registry host", "the host is there")
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.in, got.String())
		})
	}
}
