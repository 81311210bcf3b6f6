package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// packageWatch narrates a Package's status: it remembers what it last printed and prints only
// what changed. Polling (every 500 ms) rather than a watch keeps it simple and shows every
// state the status passes through for at least that long.
type packageWatch struct {
	out *narrator
	c   client.Client
	key client.ObjectKey

	last      *v1alpha1.Package
	phases    map[string]string
	announced map[string]bool
}

func newPackageWatch(out *narrator, c client.Client, key client.ObjectKey) *packageWatch {
	return &packageWatch{out: out, c: c, key: key, phases: map[string]string{}, announced: map[string]bool{}}
}

// until narrates until done says the Package reached the awaited state. A Stalled Package
// fails at once: only a change of spec or package would help.
func (w *packageWatch) until(ctx context.Context, what string, done func(*v1alpha1.Package) bool) error {
	err := poll(ctx, 500*time.Millisecond, func() (bool, error) {
		var p v1alpha1.Package
		if err := w.c.Get(ctx, w.key, &p); err != nil {
			return false, fmt.Errorf("read Package %s: %w", w.key, err)
		}
		w.observe(&p)
		if stalled := apimeta.FindStatusCondition(p.Status.Conditions, meta.StalledCondition); stalled != nil && stalled.Status == metav1.ConditionTrue {
			return false, fmt.Errorf("the Package %s is stalled: %s: %s", w.key, stalled.Reason, stalled.Message)
		}
		return done(&p), nil
	}, what)
	if err != nil && w.last != nil {
		err = fmt.Errorf("%w\nlast Package status: %s", err, readyOf(w.last))
	}
	return err
}

// observe prints what changed since the last look.
func (w *packageWatch) observe(p *v1alpha1.Package) {
	prev := w.last
	if prev == nil {
		prev = &v1alpha1.Package{}
	}
	st, old := &p.Status, &prev.Status

	if st.LastAttemptedRevision != old.LastAttemptedRevision {
		w.out.say("controller resolved %s to %s", p.Spec.Image, short(st.LastAttemptedRevision))
	}

	for i, ph := range st.Phases {
		state := string(ph.State)
		for _, na := range ph.NotAvailable {
			state += "\x00" + na.Object + ": " + na.Reason
		}
		if w.phases[ph.Name] == state {
			continue
		}
		w.phases[ph.Name] = state
		w.out.say("phase %d/%d %-12s on the %-19s %s", i+1, len(st.Phases), ph.Name, clusterOf(ph.Class)+":", describeState(ph.State))
		for _, na := range ph.NotAvailable {
			w.out.detail(fmt.Sprintf("waiting for %s: %s", na.Object, na.Reason))
		}
		announceKey := st.LastAttemptedRevision + "/" + ph.Name
		if ph.State != v1alpha1.PhasePending && !w.announced[announceKey] {
			w.announced[announceKey] = true
			if objs := phaseObjects(st.Inventory, ph.Name); len(objs) > 0 {
				w.out.detail(fmt.Sprintf("applied %s: %s", count(len(objs), "object"), strings.Join(objs, ", ")))
			}
		}
	}

	for _, gone := range removed(old.Inventory, st.Inventory) {
		w.out.say("pruned %s from the %s: it is not in the new revision", gone.object, clusterOf(gone.class))
	}
	if r, o := readyOf(p), readyOf(prev); r != o && !strings.Contains(r, v1alpha1.PhaseProgressingReason) {
		// PhaseProgressing repeats what the phase lines above say.
		w.out.say("Package %s", r)
	}
	if st.LastAppliedRevision != old.LastAppliedRevision && st.LastAppliedRevision != "" {
		w.out.say("status.lastAppliedRevision = %s: every phase of this revision is complete", short(st.LastAppliedRevision))
	}
	w.last = p.DeepCopy()
}

func describeState(s v1alpha1.PhaseState) string {
	switch s {
	case v1alpha1.PhasePending:
		return "Pending: not started"
	case v1alpha1.PhaseProgressing:
		return "Progressing: applied, waiting until its objects are available"
	case v1alpha1.PhaseComplete:
		return "Complete: every object is available"
	}
	return string(s)
}

func clusterOf(class string) string {
	if class == v1alpha1.ClassHostedCluster {
		return "hosted cluster"
	}
	return "management cluster"
}

// readyOf renders the Ready condition as one line.
func readyOf(p *v1alpha1.Package) string {
	c := apimeta.FindStatusCondition(p.Status.Conditions, meta.ReadyCondition)
	if c == nil {
		return "Ready=<none>"
	}
	return fmt.Sprintf("Ready=%s %s: %s", c.Status, c.Reason, c.Message)
}

// phaseObjects lists a phase's objects from the inventory as "Kind namespace/name".
func phaseObjects(inv *v1alpha1.Inventory, phase string) []string {
	if inv == nil {
		return nil
	}
	var out []string
	for _, ph := range inv.Phases {
		if ph.Name != phase {
			continue
		}
		for _, id := range ph.Objects {
			out = append(out, objectName(id))
		}
	}
	return out
}

type inventoryObject struct{ object, class string }

// removed returns the objects of before that after no longer holds.
func removed(before, after *v1alpha1.Inventory) []inventoryObject {
	if before == nil {
		return nil
	}
	now := map[string]bool{}
	if after != nil {
		for _, ph := range after.Phases {
			for _, id := range ph.Objects {
				now[ph.Class+"|"+id] = true
			}
		}
	}
	var out []inventoryObject
	for _, ph := range before.Phases {
		for _, id := range ph.Objects {
			if !now[ph.Class+"|"+id] {
				out = append(out, inventoryObject{object: objectName(id), class: ph.Class})
			}
		}
	}
	return out
}

// objectName turns an inventory entry group/version/kind/namespace/name into "Kind namespace/name".
func objectName(id string) string {
	parts := strings.Split(id, "/")
	if len(parts) != 5 {
		return id
	}
	if parts[3] == "" {
		return parts[2] + " " + parts[4]
	}
	return parts[2] + " " + parts[3] + "/" + parts[4]
}

// short abbreviates a digest for the story; the summary prints it whole.
func short(digest string) string {
	if i := strings.IndexByte(digest, ':'); i >= 0 && len(digest) > i+13 {
		return digest[:i+13] + "…"
	}
	return digest
}

// count says "1 object", "2 objects".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
