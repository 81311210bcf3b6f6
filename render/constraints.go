package render

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// Constraint kinds, as ConstraintError names them.
const (
	ConstraintPlatform        = "platform"
	ConstraintPlatformVersion = "platformVersion"
	ConstraintUniqueInScope   = "uniqueInScope"
)

// ConstraintError is a constraint of spec.constraints the environment does not meet. Nothing of
// the package may be applied.
type ConstraintError struct {
	// Constraint is the kind that failed: platform, platformVersion or uniqueInScope.
	Constraint string
	// Index of the constraint in spec.constraints.
	Index int
	// Detail says what the package needs and what the cluster has.
	Detail string
}

func (e *ConstraintError) Error() string {
	return fmt.Sprintf("constraint spec.constraints[%d].%s not met: %s", e.Index, e.Constraint, e.Detail)
}

// checkConstraintSpecs reports malformed constraints: each sets exactly one field, platform
// names are known, ranges parse.
func checkConstraintSpecs(file string, m *v1alpha1.PackageManifest) Errors {
	var errs Errors
	for i, c := range m.Spec.Constraints {
		field := fmt.Sprintf("spec.constraints[%d]", i)
		bad := func(f string, err error) { errs = append(errs, &Error{File: file, Field: field + f, Err: err}) }
		n := 0
		if c.Platform != nil {
			n++
			if len(c.Platform) == 0 {
				bad(".platform", errors.New("required: at least one platform"))
			}
			for j, p := range c.Platform {
				if err := checkPlatform(p); err != nil {
					bad(fmt.Sprintf(".platform[%d]", j), err)
				}
			}
		}
		if v := c.PlatformVersion; v != nil {
			n++
			if err := checkPlatform(v.Name); err != nil {
				bad(".platformVersion.name", err)
			}
			if _, err := semver.NewConstraint(v.Range); err != nil {
				bad(".platformVersion.range", fmt.Errorf("invalid version range %q: %w", v.Range, err))
			}
		}
		if c.UniqueInScope != nil {
			n++
		}
		if n != 1 {
			bad("", errors.New("exactly one of platform, platformVersion or uniqueInScope must be set"))
		}
	}
	return errs
}

func checkPlatform(p v1alpha1.PlatformName) error {
	if p != v1alpha1.PlatformKubernetes && p != v1alpha1.PlatformOpenShift {
		return fmt.Errorf("must be %s or %s, not %q", v1alpha1.PlatformKubernetes, v1alpha1.PlatformOpenShift, p)
	}
	return nil
}

// CheckConstraints checks the platform and platformVersion constraints of a (well-formed)
// manifest against env and returns the first one not met. A version the environment does not
// know (empty KubernetesVersion, as when rendering without --kubernetes-version) is not
// checked; a cluster without OpenShiftVersion is not OpenShift. uniqueInScope depends on other
// installations and is the caller's to check.
func CheckConstraints(m *v1alpha1.PackageManifest, env Environment) error {
	platform := v1alpha1.PlatformKubernetes
	if env.OpenShiftVersion != "" {
		platform = v1alpha1.PlatformOpenShift
	}
	for i, c := range m.Spec.Constraints {
		if c.Platform != nil {
			ok := slices.Contains(c.Platform, platform) ||
				// OpenShift is a Kubernetes.
				platform == v1alpha1.PlatformOpenShift && slices.Contains(c.Platform, v1alpha1.PlatformKubernetes)
			if !ok {
				names := make([]string, len(c.Platform))
				for j, p := range c.Platform {
					names[j] = string(p)
				}
				return &ConstraintError{Constraint: ConstraintPlatform, Index: i,
					Detail: fmt.Sprintf("the package runs on %s, the cluster is %s", strings.Join(names, " or "), platform)}
			}
		}
		if v := c.PlatformVersion; v != nil {
			have := env.KubernetesVersion
			if v.Name == v1alpha1.PlatformOpenShift {
				have = env.OpenShiftVersion
				if have == "" {
					return &ConstraintError{Constraint: ConstraintPlatformVersion, Index: i,
						Detail: fmt.Sprintf("the package needs OpenShift %s, the cluster is not OpenShift", v.Range)}
				}
			}
			if have == "" {
				continue
			}
			rng, err := semver.NewConstraint(v.Range)
			if err != nil {
				return &ConstraintError{Constraint: ConstraintPlatformVersion, Index: i, Detail: fmt.Sprintf("invalid version range %q: %v", v.Range, err)}
			}
			ver, err := semver.NewVersion(have)
			if err != nil {
				return &ConstraintError{Constraint: ConstraintPlatformVersion, Index: i, Detail: fmt.Sprintf("%s version %q is not a semantic version", v.Name, have)}
			}
			// Pre-release and build suffixes of a distribution (v1.30.4+k3s1, 4.16.0-rc.1)
			// say nothing about the release line: compare the release itself.
			release, _ := semver.NewVersion(fmt.Sprintf("%d.%d.%d", ver.Major(), ver.Minor(), ver.Patch()))
			if !rng.Check(release) {
				return &ConstraintError{Constraint: ConstraintPlatformVersion, Index: i,
					Detail: fmt.Sprintf("the package needs %s %s, the cluster runs %s", v.Name, v.Range, have)}
			}
		}
	}
	return nil
}

// UniqueInstallation reports whether the manifest allows one installation per namespace (for
// Packages) or per cluster (for ClusterPackages) only: its uniqueInScope constraint, and where.
func UniqueInstallation(m *v1alpha1.PackageManifest) (int, bool) {
	for i, c := range m.Spec.Constraints {
		if c.UniqueInScope != nil {
			return i, true
		}
	}
	return 0, false
}
