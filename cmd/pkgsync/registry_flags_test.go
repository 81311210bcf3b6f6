package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"pkgsync.dev/pkgsync/source"
)

func TestProgressPrinter(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	p := newProgressPrinter(&buf)

	p.show(source.Progress{Digest: "sha256:small", Size: progressThreshold - 1, Done: 10})
	assert.Empty(t, buf.String(), "small blobs stay quiet")

	const size = 1 << 20
	for _, done := range []int64{1, 2, size / 2, size/2 + 1, size} {
		p.show(source.Progress{Digest: "sha256:0123456789abcdef0123", Size: size, Done: done})
	}
	lines := strings.Split(buf.String(), "\r")[1:]
	assert.Len(t, lines, 3, "one update per whole percent: %q", buf.String())
	assert.Contains(t, lines[0], "sha256:0123456789ab")
	assert.True(t, strings.HasSuffix(lines[2], "100%\n"), "a finished blob ends its line: %q", lines[2])
}
