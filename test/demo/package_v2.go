package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

const (
	// v2Greeting replaces the greeting default of the example package in version 2.
	v2Greeting = "hello from version 2 of the package"
	// v2DroppedRole is the hosted-cluster Role that version 2 no longer holds, so it is pruned.
	v2DroppedRole = "hosted-addon-config-reader"
)

// edit is one textual change to a file of the example package.
type edit struct {
	file, old, new string
	// truncate cuts the file from old to its end, dropping the last documents.
	truncate bool
}

// v2Edits turn packages-example/hosted-addon into its version 2: a new greeting default (the
// hosted ConfigMap changes) and no Role in phase configure (the Role is pruned).
var v2Edits = []edit{
	{file: "manifest.yaml", old: "default: hello from the management cluster", new: "default: " + v2Greeting},
	{file: "configure.yaml.gotmpl", old: "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: Role\n", truncate: true},
}

// makeV2 copies the package in src to dst and applies v2Edits. An edit that finds nothing to
// change is an error: the example changed and the demo must follow.
func makeV2(src, dst string) error {
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	for _, e := range v2Edits {
		path := filepath.Join(dst, e.file)
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("make version 2: %w", err)
		}
		text := string(data)
		i := strings.Index(text, e.old)
		if i < 0 {
			return fmt.Errorf("make version 2: %s no longer contains %q; update test/demo/package_v2.go", filepath.Join(src, e.file), e.old)
		}
		if e.truncate {
			text = text[:i]
		} else {
			text = text[:i] + e.new + text[i+len(e.old):]
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			return fmt.Errorf("make version 2: %w", err)
		}
	}
	return nil
}
