package version

import (
	"runtime/debug"
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

func TestRevisionOf(t *testing.T) {
	t.Parallel()
	vcs := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	tests := []struct {
		name string
		info debug.BuildInfo
		want string
	}{
		{"a git checkout", debug.BuildInfo{Settings: vcs("vcs.revision", "62ee744", "vcs.modified", "false")}, "62ee744"},
		{"local changes", debug.BuildInfo{Settings: vcs("vcs.revision", "62ee744", "vcs.modified", "true")}, "62ee744-dirty"},
		{"go install @commit", debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261202035614-62ee744abcde"}}, "62ee744abcde"},
		{"go install @commit after a tag", debug.BuildInfo{Main: debug.Module{Version: "v1.2.4-0.20261202035614-62ee744abcde"}}, "62ee744abcde"},
		{"after a pre-release", debug.BuildInfo{Main: debug.Module{Version: "v1.2.4-rc.1.0.20261202035614-62ee744abcde+incompatible"}}, "62ee744abcde"},
		{"go install @v1.2.3", debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, Unknown},
		{"no stamp (-buildvcs=false, a worktree, go run)", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, Unknown},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, revisionOf(&tt.info), tt.name)
	}
}
