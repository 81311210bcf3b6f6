package version

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestTag(t *testing.T) {
	t.Parallel()
	tests := []struct{ version, want string }{
		{"v1.2.3", "v1.2.3"},
		{"v0.1.0-3-gabc1234-dirty", "v0.1.0-3-gabc1234-dirty"},
		{"v1.2.3+build.5", "v1.2.3-build.5"},
		{"a5cea30", "a5cea30"},
		{".hidden", "v.hidden"},
		{"", "v"},
		{strings.Repeat("x", 200), strings.Repeat("x", 128)},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, Tag(tt.version), tt.version)
	}
}

func TestImage(t *testing.T) {
	t.Parallel()
	assert.Equal(t, Repository+":"+Tag(Version), Image())
}
