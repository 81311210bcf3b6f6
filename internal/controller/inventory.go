package controller

import (
	"fmt"
	"strings"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
)

// inventoryToStatus stores an inventory compactly: one group/version/kind/namespace/name
// string per object.
func inventoryToStatus(inv apply.Inventory) *v1alpha1.Inventory {
	if len(inv.Phases) == 0 {
		return nil
	}
	out := &v1alpha1.Inventory{}
	for _, ph := range inv.Phases {
		sp := v1alpha1.InventoryPhase{Name: ph.Name, Class: ph.Class}
		for _, r := range ph.Objects {
			sp.Objects = append(sp.Objects, strings.Join([]string{r.Group, r.Version, r.Kind, r.Namespace, r.Name}, "/"))
		}
		out.Phases = append(out.Phases, sp)
	}
	return out
}

// inventoryFromStatus reads back what inventoryToStatus wrote.
func inventoryFromStatus(inv *v1alpha1.Inventory) (apply.Inventory, error) {
	var out apply.Inventory
	if inv == nil {
		return out, nil
	}
	for _, sp := range inv.Phases {
		ph := apply.InventoryPhase{Name: sp.Name, Class: sp.Class}
		for _, id := range sp.Objects {
			parts := strings.Split(id, "/")
			if len(parts) != 5 {
				return apply.Inventory{}, fmt.Errorf("inventory entry %q is not group/version/kind/namespace/name", id)
			}
			ph.Objects = append(ph.Objects, apply.ObjectRef{Group: parts[0], Version: parts[1], Kind: parts[2], Namespace: parts[3], Name: parts[4]})
		}
		out.Phases = append(out.Phases, ph)
	}
	return out, nil
}
