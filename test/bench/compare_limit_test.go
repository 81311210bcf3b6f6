package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestLimitComparison: the ratios compare medians of the runs that reached every Package, and
// the goal is missed when either ratio is above 1.2 or a side has no complete run.
func TestLimitComparison(t *testing.T) {
	t.Parallel()
	run := func(limited bool, converge, update string) limitRun {
		return limitRun{limited: limited, quiet: true, bench: map[string]map[string]string{
			"converge": {"total_s": converge, "cpu_s": "10", "reached": "1000", "healthy": "1000", "rss_peak_mib": "200"},
			"update":   {"total_s": update, "cpu_s": "8", "reached": "1000", "healthy": "1000", "rss_peak_mib": "210", "rss_file_mib": "58"},
		}}
	}
	o := options{packages: 1000, arrival: arrivalRestart}
	var out bytes.Buffer
	printLimitComparison(&out, o, "192MiB", compareOptions{repeat: 2}, []limitRun{
		run(true, "40", "33"), run(false, "38", "30"), run(true, "42", "35"), run(false, "36", "32"),
	}, 0)
	assert.Contains(t, out.String(), "COMPARE packages=1000 arrival=restart gomemlimit=192MiB runs=2 converge_s=41.00 converge_unlimited_s=37.00 converge_ratio=1.11 update_s=34.00 update_unlimited_s=31.00 update_ratio=1.10 goal=met")
	assert.Contains(t, out.String(), "210.0", "the peak RSS of a run is its largest")

	out.Reset()
	printLimitComparison(&out, o, "192MiB", compareOptions{repeat: 1}, []limitRun{run(true, "50", "33"), run(false, "38", "30")}, 0)
	assert.Contains(t, out.String(), "converge_ratio=1.32")
	assert.Contains(t, out.String(), "goal=missed")

	out.Reset()
	incomplete := run(false, "38", "30")
	incomplete.bench["update"]["reached"] = "990"
	printLimitComparison(&out, o, "192MiB", compareOptions{repeat: 1}, []limitRun{run(true, "40", "33"), incomplete}, 0)
	assert.Contains(t, out.String(), "update_ratio=0.00 goal=missed", "a run that did not finish is no baseline")
}
