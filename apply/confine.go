package apply

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
)

// checkConfinement resolves the scope of every object of a confined class before anything is
// written, and refuses the pass when one would land outside its namespace. It looks at what the
// API server will do, not at what metadata.namespace says: the engine clears the namespace of a
// cluster-scoped kind, so a ClusterRoleBinding naming the owner's namespace would otherwise be
// applied cluster-wide.
func checkConfinement(req Request) error {
	var confinedErr *ConfinementError
	for _, ph := range req.Phases {
		ns, confined := req.Confine[ph.Class]
		if !confined {
			continue
		}
		t, ok := req.Targets[ph.Class]
		if !ok || t.Client == nil {
			continue // the pass stops at this phase without writing to the class
		}
		for _, obj := range ph.Objects {
			ref := RefOf(obj)
			gvk := obj.GroupVersionKind()
			mapping, err := t.Client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
			if meta.IsNoMatchError(err) {
				if r, ok := t.Client.RESTMapper().(meta.ResettableRESTMapper); ok {
					r.Reset()
				}
				return fmt.Errorf("phase %s: %s: kind %s is not served by %s; objects confined to namespace %s can only be of kinds the cluster already serves: %w",
					ph.Name, ref, gvk, t.Name, ns, err)
			}
			if err != nil {
				return unreachable(fmt.Errorf("phase %s: %s: look up kind: %w", ph.Name, ref, err), ph.Class, t)
			}
			switch {
			case mapping.Scope.Name() != meta.RESTScopeNameNamespace:
				if confinedErr == nil {
					confinedErr = &ConfinementError{Namespace: ns, Target: t.Name}
				}
				confinedErr.Objects = append(confinedErr.Objects, fmt.Sprintf("%s %s (cluster-scoped)", obj.GetKind(), obj.GetName()))
			case obj.GetNamespace() == "" && req.DefaultNamespace != ns:
				if confinedErr == nil {
					confinedErr = &ConfinementError{Namespace: ns, Target: t.Name}
				}
				confinedErr.Objects = append(confinedErr.Objects, fmt.Sprintf("%s %s (no namespace)", obj.GetKind(), obj.GetName()))
			case obj.GetNamespace() != "" && obj.GetNamespace() != ns:
				if confinedErr == nil {
					confinedErr = &ConfinementError{Namespace: ns, Target: t.Name}
				}
				confinedErr.Objects = append(confinedErr.Objects, fmt.Sprintf("%s %s/%s", obj.GetKind(), obj.GetNamespace(), obj.GetName()))
			}
		}
	}
	if confinedErr != nil {
		return confinedErr
	}
	return nil
}
