package render

import (
	"fmt"

	kustypes "sigs.k8s.io/kustomize/api/types"

	"pkgsync.dev/pkgsync/internal/regexcost"
)

// checkSelectors refuses the patch and replacement selectors of a kustomization that kustomize
// would run unbounded. kustomize compiles a selector's group, version, kind, name and namespace
// as regular expressions and matches each resource against them, without a context: each
// pattern is checked by regexcost's rules first (size, case folding; a pattern kustomize could
// not compile gets its own message here), and the patterns of one kustomization together are at
// most regexcost.MaxProgram instructions, so that matching every resource of the package costs
// at most that many steps per character of its names.
func (c *refChecker) checkSelectors(file string, k *kustypes.Kustomization) {
	var total int64
	check := func(field string, sel *kustypes.Selector) {
		if sel == nil {
			return
		}
		for _, f := range []struct{ name, pattern string }{
			{"group", sel.Group}, {"version", sel.Version}, {"kind", sel.Kind},
			{"name", sel.Name}, {"namespace", sel.Namespace},
		} {
			if f.pattern == "" {
				continue
			}
			re, err := regexcost.Compile("^(?:" + f.pattern + ")$") // anchored as kustomize does
			if err != nil {
				c.fail(file, field+"."+f.name, fmt.Errorf("selector: %w", err))
				continue
			}
			total += re.Size()
		}
	}
	for i := range k.Patches {
		check(fmt.Sprintf("patches[%d].target", i), k.Patches[i].Target)
	}
	for i := range k.PatchesJson6902 { //nolint:staticcheck // deprecated, but kustomize still loads it
		check(fmt.Sprintf("patchesJson6902[%d].target", i), k.PatchesJson6902[i].Target) //nolint:staticcheck // as above
	}
	for i, r := range k.Replacements {
		if r.Source != nil {
			check(fmt.Sprintf("replacements[%d].source", i), &kustypes.Selector{ResId: r.Source.ResId})
		}
		for j, t := range r.Targets {
			if t == nil {
				continue
			}
			check(fmt.Sprintf("replacements[%d].targets[%d].select", i, j), t.Select)
			for l, rej := range t.Reject {
				check(fmt.Sprintf("replacements[%d].targets[%d].reject[%d]", i, j, l), rej)
			}
		}
	}
	if total > regexcost.MaxProgram {
		c.fail(file, "", fmt.Errorf("the selectors' patterns are %d instructions together, over the limit of %d per kustomization: kustomize matches every resource against each", total, regexcost.MaxProgram))
	}
}
