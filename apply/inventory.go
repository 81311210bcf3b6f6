package apply

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// ObjectRef identifies an object compactly, for inventories and messages.
type ObjectRef struct {
	Group     string `json:"group,omitempty"`
	Version   string `json:"version"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// RefOf returns the reference of an object.
func RefOf(obj *unstructured.Unstructured) ObjectRef {
	gvk := obj.GroupVersionKind()
	return ObjectRef{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// String reads like "Deployment.apps ns/name", or "Namespace name" for cluster-scoped objects.
func (r ObjectRef) String() string {
	kind := r.Kind
	if r.Group != "" {
		kind += "." + r.Group
	}
	if r.Namespace == "" {
		return kind + " " + r.Name
	}
	return kind + " " + r.Namespace + "/" + r.Name
}

// GroupVersionKind of the referenced object.
func (r ObjectRef) GroupVersionKind() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}
}

// key identifies an object on the cluster of a phase class, regardless of the API version it
// was applied with. The class is part of it: one package may hold the same group, kind,
// namespace and name for the management and for the hosted cluster, two different objects.
type key struct{ class, group, kind, namespace, name string }

func (r ObjectRef) key(class string) key { return key{class, r.Group, r.Kind, r.Namespace, r.Name} }

// Inventory is the set of objects applied for an owner, by phase in the order they are applied.
type Inventory struct {
	Phases []InventoryPhase `json:"phases,omitempty"`
}

// InventoryPhase holds the objects of one phase.
type InventoryPhase struct {
	Name    string      `json:"name"`
	Class   string      `json:"class,omitempty"`
	Objects []ObjectRef `json:"objects,omitempty"`
	// Jobs records the Jobs of Objects that ran, in the order of Objects: the desired state each
	// ran in and how it finished (job.go).
	Jobs []v1alpha1.InventoryJob `json:"jobs,omitempty"`
}

// Len is the number of objects in the inventory.
func (inv Inventory) Len() int {
	n := 0
	for _, p := range inv.Phases {
		n += len(p.Objects)
	}
	return n
}

// inventoryBuilder collects an inventory in phase order without duplicates.
type inventoryBuilder struct {
	inv  Inventory
	seen map[key]bool
	// jobs holds the Job records to keep, by the Job they name: each goes to the phase that
	// holds its Job.
	jobs map[key]v1alpha1.InventoryJob
}

func newInventoryBuilder() *inventoryBuilder {
	return &inventoryBuilder{seen: map[key]bool{}, jobs: map[key]v1alpha1.InventoryJob{}}
}

func (b *inventoryBuilder) add(phase, class string, ref ObjectRef) {
	if b.seen[ref.key(class)] {
		return
	}
	b.seen[ref.key(class)] = true
	for i := range b.inv.Phases {
		if b.inv.Phases[i].Name == phase && b.inv.Phases[i].Class == class {
			b.inv.Phases[i].Objects = append(b.inv.Phases[i].Objects, ref)
			return
		}
	}
	b.inv.Phases = append(b.inv.Phases, InventoryPhase{Name: phase, Class: class, Objects: []ObjectRef{ref}})
}

// addPhase makes sure an (even empty) phase exists at this point of the order.
func (b *inventoryBuilder) addPhase(phase, class string) {
	for _, p := range b.inv.Phases {
		if p.Name == phase && p.Class == class {
			return
		}
	}
	b.inv.Phases = append(b.inv.Phases, InventoryPhase{Name: phase, Class: class})
}

// build returns the phases that hold objects, each with the records of its Jobs in the order of
// its objects: the same inventory gives the same status, whatever order the records came in.
func (b *inventoryBuilder) build() Inventory {
	out := Inventory{}
	for _, p := range b.inv.Phases {
		if len(p.Objects) == 0 {
			continue
		}
		p.Jobs = nil
		for _, ref := range p.Objects {
			if run, ok := b.jobs[ref.key(p.Class)]; ok {
				p.Jobs = append(p.Jobs, run)
			}
		}
		out.Phases = append(out.Phases, p)
	}
	return out
}
