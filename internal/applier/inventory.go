package applier

import (
	"fmt"
	"strings"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
)

// inventoryToStatus stores an inventory compactly: per phase, each run of objects of one kind
// in one namespace as one group of names, in the inventory's order. A package's objects come in
// such runs (a file of ConfigMaps, the RBAC of an operator), so the group, version, kind and
// namespace, most of an object's reference, are stored once per run rather than per object.
// The records of the Jobs that ran are stored as they are: the status is the only memory of
// them a restarted controller has.
func inventoryToStatus(inv apply.Inventory) *v1alpha1.Inventory {
	if len(inv.Phases) == 0 {
		return nil
	}
	out := &v1alpha1.Inventory{}
	for _, ph := range inv.Phases {
		sp := v1alpha1.InventoryPhase{Name: ph.Name, Class: ph.Class, Jobs: ph.Jobs}
		for _, r := range ph.Objects {
			if n := len(sp.Groups); n > 0 {
				g := &sp.Groups[n-1]
				if g.Group == r.Group && g.Version == r.Version && g.Kind == r.Kind && g.Namespace == r.Namespace {
					g.Names = append(g.Names, r.Name)
					continue
				}
			}
			sp.Groups = append(sp.Groups, v1alpha1.InventoryGroup{Group: r.Group, Version: r.Version, Kind: r.Kind, Namespace: r.Namespace, Names: []string{r.Name}})
		}
		out.Phases = append(out.Phases, sp)
	}
	return out
}

// inventoryFromStatus reads back what inventoryToStatus wrote, and the inventories of earlier
// versions, one group/version/kind/namespace/name string per object (objects), so that a
// resource whose status an earlier version wrote is pruned and torn down all the same.
func inventoryFromStatus(inv *v1alpha1.Inventory) (apply.Inventory, error) {
	var out apply.Inventory
	if inv == nil {
		return out, nil
	}
	for _, sp := range inv.Phases {
		ph := apply.InventoryPhase{Name: sp.Name, Class: sp.Class, Jobs: sp.Jobs}
		for _, id := range sp.Objects {
			parts := strings.Split(id, "/")
			if len(parts) != 5 {
				return apply.Inventory{}, fmt.Errorf("inventory entry %q is not group/version/kind/namespace/name", id)
			}
			ph.Objects = append(ph.Objects, apply.ObjectRef{Group: parts[0], Version: parts[1], Kind: parts[2], Namespace: parts[3], Name: parts[4]})
		}
		for _, g := range sp.Groups {
			for _, name := range g.Names {
				ph.Objects = append(ph.Objects, apply.ObjectRef{Group: g.Group, Version: g.Version, Kind: g.Kind, Namespace: g.Namespace, Name: name})
			}
		}
		out.Phases = append(out.Phases, ph)
	}
	return out, nil
}
