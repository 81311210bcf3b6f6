package fleet

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/fleet/rollout"
	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/internal/reconciler"
)

// fleetFieldOwner is the field manager of the fleet's writes to member Packages.
const fleetFieldOwner = "pkgsync-fleet"

// fleetRevisionSource is what a member's spec is made from: a revision's pinned image, template
// and overrides.
type fleetRevisionSource struct {
	name      string
	image     string
	template  *v1alpha1.PackageTemplate
	overrides []v1alpha1.ConfigOverride
}

// templateDigest is the sha256 of what a revision's members are made from besides the image:
// the template (its image included, so that setting it back is a change) and the overrides.
func templateDigest(spec *v1alpha1.HostedClusterPackageSpec) (string, error) {
	data, err := json.Marshal(struct {
		T v1alpha1.PackageTemplate  `json:"t"`
		O []v1alpha1.ConfigOverride `json:"o"`
	}{spec.Template, spec.ConfigOverrides})
	if err != nil {
		return "", fmt.Errorf("hash template: %w", err)
	}
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// revisionName names a revision by 12 hex digits of its image digest and 8 of its template digest.
func revisionName(digest, templateDigest string) string {
	short := func(d string, n int) string {
		if i := bytes.IndexByte([]byte(d), ':'); i >= 0 {
			d = d[i+1:]
		}
		return d[:min(n, len(d))]
	}
	return short(digest, 12) + "-" + short(templateDigest, 8)
}

// desiredMember is the member Package of a fleet for one hosted cluster, on one revision.
func desiredMember(fleet *v1alpha1.HostedClusterPackage, rev fleetRevisionSource, m *rollout.Member, now time.Time) (*v1alpha1.Package, error) {
	spec := rev.template.Spec.DeepCopy()
	spec.Image = rev.image
	config, err := mergedConfig(spec.Config, rev.overrides, m.Labels)
	if err != nil {
		return nil, err
	}
	spec.Config = config
	normalizeSpec(spec)

	lbls := maps.Clone(rev.template.Metadata.Labels)
	if lbls == nil {
		lbls = map[string]string{}
	}
	lbls[v1alpha1.FleetLabel] = fleet.Name
	annotations := maps.Clone(rev.template.Metadata.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[v1alpha1.FleetUIDAnnotation] = string(fleet.UID)
	annotations[v1alpha1.FleetRevisionAnnotation] = rev.name
	since := now.UTC().Format(time.RFC3339)
	if m.Pkg != nil && m.Revision() == rev.name {
		if t, ok := m.Pkg.GetAnnotations()[v1alpha1.FleetRevisionTimeAnnotation]; ok {
			since = t
		}
	}
	annotations[v1alpha1.FleetRevisionTimeAnnotation] = since
	return &v1alpha1.Package{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.PackageKind},
		ObjectMeta: metav1.ObjectMeta{
			Name: fleet.Name, Namespace: m.Namespace, Labels: lbls, Annotations: annotations,
			OwnerReferences: fleetOwners(nil, fleet),
		},
		Spec: *spec,
	}, nil
}

// withShardLabels gives a member the fleet's values of the labels the controller's
// --watch-label-selector reads (Options.ShardLabelKeys), over the template's: a member matches
// the selector its fleet matches, so one controller reconciles both. A key the fleet lacks is
// dropped from the member too (a "!key" shard).
func withShardLabels(member *v1alpha1.Package, fleet *v1alpha1.HostedClusterPackage, keys []string) {
	for _, k := range keys {
		if v, ok := fleet.Labels[k]; ok {
			member.Labels[k] = v
		} else {
			delete(member.Labels, k)
		}
	}
}

func fleetOwnerReference(fleet *v1alpha1.HostedClusterPackage) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.HostedClusterPackageKind,
		Name: fleet.Name, UID: fleet.UID, Controller: ptr.To(true),
	}
}

// normalizeSpec fills in the CRD's defaults, so that a spec read back from the API server and
// one made here compare equal when they mean the same.
func normalizeSpec(spec *v1alpha1.PackageSpec) {
	if spec.Interval == nil {
		spec.Interval = &metav1.Duration{Duration: v1alpha1.DefaultInterval}
	}
	if spec.AdoptionPolicy == "" {
		spec.AdoptionPolicy = v1alpha1.AdoptNever
	}
	if spec.Prune == nil {
		spec.Prune = ptr.To(true)
	}
	if spec.Config != nil {
		// The same values in a canonical form: object keys sorted, no spaces.
		var v any
		if json.Unmarshal(spec.Config.Raw, &v) == nil {
			if raw, err := json.Marshal(v); err == nil {
				spec.Config = &apiextensionsv1.JSON{Raw: raw}
			}
		}
	}
}

// mergedConfig merges the overrides whose selector matches the cluster's labels over base, in
// order: objects key by key, anything else replaced.
func mergedConfig(base *apiextensionsv1.JSON, overrides []v1alpha1.ConfigOverride, clusterLabels map[string]string) (*apiextensionsv1.JSON, error) {
	var merged any
	if base != nil && len(base.Raw) > 0 {
		if err := json.Unmarshal(base.Raw, &merged); err != nil {
			return nil, fmt.Errorf("spec.template.spec.config: %w", err)
		}
	}
	applied := false
	for i, o := range overrides {
		sel, err := metav1.LabelSelectorAsSelector(&o.HostedClusterSelector)
		if err != nil {
			return nil, fmt.Errorf("spec.configOverrides[%d].hostedClusterSelector: %w", i, err)
		}
		if !sel.Matches(labels.Set(clusterLabels)) || o.Config == nil {
			continue
		}
		var v any
		if err := json.Unmarshal(o.Config.Raw, &v); err != nil {
			return nil, fmt.Errorf("spec.configOverrides[%d].config: %w", i, err)
		}
		merged = mergeValues(merged, v)
		applied = true
	}
	if !applied {
		return base, nil
	}
	raw, err := json.Marshal(merged)
	if err != nil {
		return nil, fmt.Errorf("merge config overrides: %w", err)
	}
	return &apiextensionsv1.JSON{Raw: raw}, nil
}

func mergeValues(base, over any) any {
	bm, ok1 := base.(map[string]any)
	om, ok2 := over.(map[string]any)
	if !ok1 || !ok2 {
		return over
	}
	out := maps.Clone(bm)
	for k, v := range om {
		out[k] = mergeValues(bm[k], v)
	}
	return out
}

// memberUpToDate reports whether an existing member already is what desired says: same spec,
// the desired labels and annotations, the fleet's ownerReference as its deletionPolicy has it
// (fleetOwners). Anything else is drift.
func memberUpToDate(existing, desired *v1alpha1.Package, fleet *v1alpha1.HostedClusterPackage) bool {
	spec := existing.Spec.DeepCopy()
	normalizeSpec(spec)
	if !equality.Semantic.DeepEqual(spec, &desired.Spec) {
		return false
	}
	for k, v := range desired.Labels {
		if existing.Labels[k] != v {
			return false
		}
	}
	for k, v := range desired.Annotations {
		if existing.Annotations[k] != v {
			return false
		}
	}
	return fleetOwnersUpToDate(existing.OwnerReferences, fleet)
}

// writeMember creates a member, or replaces an existing one's spec and takes back the labels,
// annotations and ownerReference the fleet sets (none with deletionPolicy Orphan: one there is
// taken off), and returns the generation the API server gave it. The whole spec is replaced,
// not merged: a field someone added by hand is drift too.
func writeMember(ctx context.Context, c client.Client, fleet *v1alpha1.HostedClusterPackage, existing, desired *v1alpha1.Package) (int64, error) {
	if existing == nil || existing.UID == "" {
		if err := c.Create(ctx, desired, client.FieldOwner(fleetFieldOwner)); err != nil {
			return 0, fmt.Errorf("create member %s/%s: %w", desired.Namespace, desired.Name, err)
		}
		return desired.Generation, nil
	}
	updated := existing.DeepCopy()
	updated.Spec = desired.Spec
	if updated.Labels == nil {
		updated.Labels = map[string]string{}
	}
	maps.Copy(updated.Labels, desired.Labels)
	if updated.Annotations == nil {
		updated.Annotations = map[string]string{}
	}
	maps.Copy(updated.Annotations, desired.Annotations)
	if !fleetOwnersUpToDate(updated.OwnerReferences, fleet) {
		updated.OwnerReferences = fleetOwners(updated.OwnerReferences, fleet)
	}
	// Optimistic concurrency: a member changed since the cache saw it is written on a later pass.
	if err := c.Update(ctx, updated, client.FieldOwner(fleetFieldOwner)); err != nil {
		return 0, fmt.Errorf("update member %s/%s: %w", desired.Namespace, desired.Name, err)
	}
	return updated.Generation, nil
}

// memberWrites remembers the members a fleet wrote until the cache shows them: a reconcile
// that ran on a cache older than the fleet's own writes would count a member it just moved as
// still Ready on its old revision, and move more members than maxUnavailable allows.
type memberWrites struct {
	written reconciler.Written[memberKey, memberWrite]
}

// memberKey names a member by its fleet (by name) and namespace.
type memberKey struct {
	fleet, namespace string
}

// memberWrite is what a fleet wrote of a member: the UID of the fleet that wrote it (a fleet
// created again under the same name did not), the generation the write gave the member, and
// the revision it put the member on.
type memberWrite struct {
	fleet      types.UID
	generation int64
	revision   string
}

func (w *memberWrites) remember(fleet *v1alpha1.HostedClusterPackage, namespace string, generation int64, revision string) {
	w.written.Remember(memberKey{fleet.Name, namespace}, memberWrite{fleet: fleet.UID, generation: generation, revision: revision})
}

// view returns the member as the fleet last wrote it when the cache has not caught up (pending):
// on the revision written, its status not yet about it. Members the cache shows as written are
// forgotten.
func (w *memberWrites) view(fleet *v1alpha1.HostedClusterPackage, namespace string, cached *v1alpha1.Package) (pkg *v1alpha1.Package, pending bool) {
	wrote, pending := w.written.Pending(memberKey{fleet.Name, namespace}, func(wrote memberWrite) bool {
		return wrote.fleet != fleet.UID || (cached != nil && cached.Generation >= wrote.generation)
	})
	if !pending {
		return cached, false
	}
	written := &v1alpha1.Package{}
	if cached != nil {
		cached.ObjectMeta.DeepCopyInto(&written.ObjectMeta)
	}
	written.Namespace = namespace
	written.Generation = wrote.generation
	if written.Annotations == nil {
		written.Annotations = map[string]string{}
	}
	written.Annotations[v1alpha1.FleetRevisionAnnotation] = wrote.revision
	return written, true
}

// forget drops what is remembered of a fleet's members, when the fleet is gone.
func (w *memberWrites) forget(fleet string) {
	w.written.DropWhere(func(k memberKey) bool { return k.fleet == fleet })
}

// members lists the selected HostedClusters with their member Packages, and the clusters that
// get no member: those whose namespace holds a Package of the member's name that is not this
// fleet's, and those whose hosted-control-plane namespace another HostedCluster maps to too
// (a-x/b and a/x-b both map to a-x-b) when HyperShift's HostedControlPlane there does not name
// them. One namespace never gets a member written for two clusters.
func (r *fleetSteps) members(ctx context.Context, fleet *v1alpha1.HostedClusterPackage, owned []*v1alpha1.Package) ([]*rollout.Member, []v1alpha1.MemberStatus, error) {
	selector := labels.Everything()
	if fleet.Spec.HostedClusterSelector != nil {
		var err error
		if selector, err = metav1.LabelSelectorAsSelector(fleet.Spec.HostedClusterSelector); err != nil {
			return nil, nil, &reconciler.StageError{Reason: v1alpha1.InvalidSpecReason, Err: fmt.Errorf("spec.hostedClusterSelector: %w", err)}
		}
	}
	hcs := &unstructured.UnstructuredList{}
	hcs.SetGroupVersionKind(hosted.HostedClusterGVK.GroupVersion().WithKind(hosted.HostedClusterGVK.Kind + "List"))
	// Every HostedCluster, selected or not: an unselected one may own the namespace a selected
	// one maps to.
	if err := r.client.List(ctx, hcs, client.UnsafeDisableDeepCopy); err != nil {
		return nil, nil, fmt.Errorf("list HostedClusters: %w", err)
	}
	mapped := map[string][]types.NamespacedName{}
	for i := range hcs.Items {
		hc := &hcs.Items[i]
		ns := hosted.ControlPlaneNamespace(hc.GetNamespace(), hc.GetName())
		mapped[ns] = append(mapped[ns], types.NamespacedName{Namespace: hc.GetNamespace(), Name: hc.GetName()})
	}
	owners := namespaceOwners{}
	byNamespace := map[string]*v1alpha1.Package{}
	for _, p := range owned {
		byNamespace[p.Namespace] = p
	}
	var (
		members    []*rollout.Member
		collisions []v1alpha1.MemberStatus
	)
	for i := range hcs.Items {
		hc := &hcs.Items[i]
		if !hc.GetDeletionTimestamp().IsZero() || !selector.Matches(labels.Set(hc.GetLabels())) {
			continue
		}
		m := &rollout.Member{Namespace: hosted.ControlPlaneNamespace(hc.GetNamespace(), hc.GetName()), Labels: hc.GetLabels(), Cluster: hosted.HostedClusterOf(hc)}
		if p := fleet.Spec.Rollout.Partitions; p != nil {
			m.Partition = hc.GetLabels()[p.LabelKey]
		}
		self := types.NamespacedName{Namespace: hc.GetNamespace(), Name: hc.GetName()}
		msg, err := owners.collision(ctx, r.apiReader, m.Namespace, self, mapped[m.Namespace])
		if err != nil {
			return nil, nil, err
		}
		if msg != "" {
			collisions = append(collisions, v1alpha1.MemberStatus{Namespace: m.Namespace, Partition: m.Partition, Reason: v1alpha1.CollisionReason,
				Message: msg + "; no member is written for it, and a member there is left as it is"})
			continue
		}
		m.Pkg, m.Pending = r.writes.view(fleet, m.Namespace, byNamespace[m.Namespace])
		if m.Pkg == nil {
			other := &v1alpha1.Package{}
			err := r.client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: fleet.Name}, other)
			switch {
			case err == nil && IsFleetMember(other, fleet):
				// Created after the list was read (the fleet's controller at work while
				// fleet plan reads, or the cache between two events): it is this fleet's.
				m.Pkg, m.Pending = r.writes.view(fleet, m.Namespace, other)
			case err == nil:
				collisions = append(collisions, v1alpha1.MemberStatus{Namespace: m.Namespace, Partition: m.Partition, Reason: v1alpha1.CollisionReason,
					Message: fmt.Sprintf("Package %s/%s exists and is not this fleet's (label %s=%q): it is left alone; delete or rename it",
						m.Namespace, fleet.Name, v1alpha1.FleetLabel, other.Labels[v1alpha1.FleetLabel])})
				continue
			case !apierrors.IsNotFound(err):
				return nil, nil, fmt.Errorf("read Package %s/%s: %w", m.Namespace, fleet.Name, err)
			}
		}
		members = append(members, m)
	}
	slices.SortFunc(members, func(a, b *rollout.Member) int { return strings.Compare(a.Namespace, b.Namespace) })
	return members, collisions, nil
}

// namespaceOwners remembers, within one reconcile, which HostedCluster owns a namespace
// several map to (or why that cannot be told).
type namespaceOwners map[string]namespaceOwner

type namespaceOwner struct {
	owner types.NamespacedName
	err   error
}

// collision says why the HostedCluster self gets no member in namespace, which candidates map
// to: another one's HostedControlPlane names it, or none can be told apart. "" when self may
// have it.
func (o namespaceOwners) collision(ctx context.Context, reader client.Reader, namespace string, self types.NamespacedName, candidates []types.NamespacedName) (string, error) {
	if len(candidates) <= 1 {
		return "", nil
	}
	known, seen := o[namespace]
	if !seen {
		// Uncached and metadata only, for the rare namespace several clusters map to.
		owner, err := hosted.OwnerOfNamespace(ctx, reader, namespace, candidates)
		var ambiguous *hosted.AmbiguousError
		if err != nil && !errors.As(err, &ambiguous) {
			return "", err
		}
		known = namespaceOwner{owner: owner, err: err}
		o[namespace] = known
	}
	switch {
	case known.err != nil:
		return known.err.Error(), nil
	case known.owner != self:
		return fmt.Sprintf("HostedCluster %s maps to namespace %s, which belongs to HostedCluster %s (its HostedControlPlane names it)", self, namespace, known.owner), nil
	}
	return "", nil
}

// ownedMembers lists the fleet's members from the cache (IsFleetMember). Read once per
// reconcile and shared by its steps.
func (r *fleetSteps) ownedMembers(ctx context.Context, fleet *v1alpha1.HostedClusterPackage) ([]*v1alpha1.Package, error) {
	return r.listMembers(ctx, r.client, fleet)
}

// listMembers lists the fleet's members as reader has them: the Packages labelled with the
// fleet (a selection the API server or the cache makes) that are its members.
func (r *fleetSteps) listMembers(ctx context.Context, reader client.Reader, fleet *v1alpha1.HostedClusterPackage) ([]*v1alpha1.Package, error) {
	list := &v1alpha1.PackageList{}
	if err := reader.List(ctx, list, client.MatchingLabels{v1alpha1.FleetLabel: fleet.Name}); err != nil {
		return nil, fmt.Errorf("list members: %w", err)
	}
	var owned []*v1alpha1.Package
	for i := range list.Items {
		if p := &list.Items[i]; IsFleetMember(p, fleet) {
			owned = append(owned, p)
		}
	}
	return owned, nil
}
