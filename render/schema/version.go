package schema

import (
	"fmt"
	"regexp"
	"strconv"
)

// kubernetesVersion is the Kubernetes release whose schemas the checker knows: that of the
// k8s.io/api and k8s.io/client-go modules pkgsync is built with (v0.36.x is Kubernetes 1.36).
// TestKubernetesVersion keeps the two in step.
const kubernetesVersion = "1.36"

// KubernetesVersion is the Kubernetes release (major.minor) whose built-in kinds the checker
// knows, for messages that say what was checked.
func KubernetesVersion() string { return kubernetesVersion }

// Release is a Kubernetes release, major.minor: what the checks of a target cluster depend on.
// The zero Release is the one whose schemas the checker knows (KubernetesVersion).
type Release struct{ Major, Minor int }

func (r Release) String() string {
	if r == (Release{}) {
		return kubernetesVersion
	}
	return fmt.Sprintf("%d.%d", r.Major, r.Minor)
}

// before tells whether r is an older release than o, the zero Release being the built-in one.
func (r Release) before(o Release) bool {
	r, o = r.orBuiltIn(), o.orBuiltIn()
	return r.Major < o.Major || r.Major == o.Major && r.Minor < o.Minor
}

func (r Release) orBuiltIn() Release {
	if r == (Release{}) {
		r, _ = ParseRelease(kubernetesVersion)
	}
	return r
}

// BuiltIn tells whether r is the release whose schemas the checker knows.
func (r Release) BuiltIn() bool { return r.orBuiltIn() == Release{}.orBuiltIn() }

var releaseRE = regexp.MustCompile(`^v?(\d+)\.(\d+)(?:\.\d+)?(?:[-+].*)?$`)

// ParseRelease reads a Kubernetes version as kubeconform's -kubernetes-version and Package
// Operator's test.kubeconform.kubernetesVersion write one (v1.30.0, 1.30, v1.31.0-rc.1) as its
// release; ok is false for anything else (kubeconform's "master").
func ParseRelease(s string) (r Release, ok bool) {
	m := releaseRE.FindStringSubmatch(s)
	if m == nil {
		return Release{}, false
	}
	major, err1 := strconv.Atoi(m[1])
	minor, err2 := strconv.Atoi(m[2])
	if err1 != nil || err2 != nil || major == 0 {
		return Release{}, false
	}
	return Release{Major: major, Minor: minor}, true
}

// ReleaseRules describe the checks made otherwise for target than for the built-in release,
// because the API server of target has other rules and the checker knows them; none when target
// is the built-in release or newer (the checker knows nothing newer than its own).
func ReleaseRules(target Release) []string {
	var rules []string
	for _, r := range olderNameRules {
		if target.before(r.since) {
			rules = append(rules, r.says)
		}
	}
	return rules
}
