package fleet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	crsource "sigs.k8s.io/controller-runtime/pkg/source"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/fleet/rollout"
	"pkgsync.dev/pkgsync/internal/reconciler"
	"pkgsync.dev/pkgsync/internal/setup"
)

// fleetSecretField indexes HostedClusterPackages by the names of the Secrets their members
// need copied: the pull and verification Secrets of the template and of the stable revision's.
const fleetSecretField = ".fleetSecrets"

// secretRole is what a member does with a copied Secret; it decides which of the source's data
// keys are copied.
type secretRole uint8

const (
	// rolePull: spec.pullSecretRef. Only .dockerconfigjson is copied.
	rolePull secretRole = 1 << iota
	// roleVerify: spec.verify.secretRef. Only the public keys (*.pub) and trusted_root.json
	// are copied: whatever else the Secret holds (a private key kept beside its public key)
	// stays in the controller's namespace.
	roleVerify
)

// fleetSecretNames returns the Secrets a fleet's members read, by name: those the template
// names and those the stable revision's template named, which the members the rollout has not
// moved yet still read. Only the fleet's spec and its own status name them, never a member
// Package: whoever may edit a member (a hold keeps the fleet from reverting the edit) must not
// get another Secret of the controller's namespace copied by naming it there.
func fleetSecretNames(fleet *v1alpha1.HostedClusterPackage) map[string]secretRole {
	names := map[string]secretRole{}
	add := func(spec *v1alpha1.PackageSpec) {
		if spec.PullSecretRef != nil && spec.PullSecretRef.Name != "" {
			names[spec.PullSecretRef.Name] |= rolePull
		}
		if spec.Verify != nil && spec.Verify.SecretRef.Name != "" {
			names[spec.Verify.SecretRef.Name] |= roleVerify
		}
	}
	add(&fleet.Spec.Template.Spec)
	if s := fleet.Status.Stable; s != nil {
		add(&s.Template.Spec)
	}
	return names
}

// indexFleetSecrets is the fleetSecretField index.
func indexFleetSecrets(o client.Object) []string {
	f, ok := o.(*v1alpha1.HostedClusterPackage)
	if !ok {
		return nil
	}
	return slices.Sorted(maps.Keys(fleetSecretNames(f)))
}

// copiedData is what a copy of source holds for the roles given, and its type; ok is false
// when source has nothing a member could use (a pull Secret without .dockerconfigjson, a
// verification Secret without a key).
func copiedData(source *corev1.Secret, role secretRole) (data map[string][]byte, typ corev1.SecretType, ok bool) {
	data = map[string][]byte{}
	typ = corev1.SecretTypeOpaque
	if role&rolePull != 0 {
		config, found := source.Data[corev1.DockerConfigJsonKey]
		if !found {
			return nil, "", false
		}
		data[corev1.DockerConfigJsonKey] = config
		typ = corev1.SecretTypeDockerConfigJson
	}
	if role&roleVerify != 0 {
		keys := 0
		for k, v := range source.Data {
			if strings.HasSuffix(k, v1alpha1.PublicKeySuffix) || k == v1alpha1.TrustedRootKey {
				data[k] = v
				keys++
			}
		}
		if keys == 0 {
			return nil, "", false
		}
	}
	return data, typ, true
}

// fleetSecrets keeps, in the namespace of every member of a fleet, a copy of each Secret its
// members read (fleetSecretNames), taken from the controller's namespace.
//
// A copy is the fleet's when it carries the fleet's UID (isFleetCopy, fleet_ownership.go: the
// annotation pkgsync.dev/fleet-uid and, with deletionPolicy Delete, an ownerReference); it
// carries the label pkgsync.dev/fleet too, which selects what the copies cache holds and wakes
// the fleet when a copy changes. A Secret of that name which is not the fleet's is never written: the
// member is reported (SecretCollision) and left with it. Copies go only to the namespaces of
// the fleet's members, as members() decides them (a selected HostedCluster's own
// hosted-control-plane namespace, never one two clusters collide on), so no label, annotation
// or object a tenant writes in a namespace gets anything copied there.
type fleetSecrets struct {
	client client.Client
	// apiReader reads the sources (uncached: only the Secrets named, when named) and a copy
	// the cache has not caught up with.
	apiReader client.Reader
	// copies is the cache of Secrets labelled pkgsync.dev/fleet: the copies, and any Secret
	// someone labelled so (harmless: only ones with the fleet's UID count, and only a copy
	// wakes the fleet, fleetWakes).
	copies client.Reader
	// namespace is the controller's, where the sources are.
	namespace string
	// written remembers the copies written until the cache shows them (resourceVersion), so
	// that a reconcile on a cache behind the fleet's own write does not write again.
	written reconciler.Written[copyKey, string]
}

// copyKey names a copy by its fleet (by name), namespace and name.
type copyKey struct {
	fleet, namespace, name string
}

// setupFleetSecrets makes the fleet's Secret copier, or returns nil when the controller has no
// namespace to read sources in. Its two caches are the manager's to start (before the
// controllers, as its own cache is): the copies, selected by label across namespaces, and the
// metadata of the controller namespace's Secrets, whose changes wake the fleets that name them
// (sources are read uncached, when a fleet reconciles: no Secret data of the controller's
// namespace is held).
func setupFleetSecrets(ctx context.Context, s *setup.Services) (*fleetSecrets, *secretCaches, error) {
	if s.Options.Namespace == "" {
		return nil, nil, nil
	}
	mgr := s.Manager
	copied, err := labels.NewRequirement(v1alpha1.FleetLabel, selection.Exists, nil)
	if err != nil {
		return nil, nil, err
	}
	copies, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		ByObject:         map[client.Object]cache.ByObject{&corev1.Secret{}: {Label: labels.NewSelector().Add(*copied)}},
		DefaultTransform: cache.TransformStripManagedFields(),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("create the cache of fleet Secret copies: %w", err)
	}
	if _, err := copies.GetInformer(ctx, &corev1.Secret{}); err != nil {
		return nil, nil, fmt.Errorf("watch fleet Secret copies: %w", err)
	}
	sources, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultNamespaces: map[string]cache.Config{s.Options.Namespace: {}},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("create the cache of fleet Secret sources: %w", err)
	}
	for _, c := range []cache.Cache{copies, sources} {
		if err := mgr.Add(reconciler.ManagedCache{Cache: c}); err != nil {
			return nil, nil, fmt.Errorf("start fleet Secret caches: %w", err)
		}
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &v1alpha1.HostedClusterPackage{}, fleetSecretField, indexFleetSecrets); err != nil {
		return nil, nil, fmt.Errorf("index HostedClusterPackages by Secret: %w", err)
	}
	fs := &fleetSecrets{client: mgr.GetClient(), apiReader: mgr.GetAPIReader(), copies: copies, namespace: s.Options.Namespace}
	return fs, &secretCaches{copies: copies, sources: sources}, nil
}

// secretCaches are the caches the fleet's Secret watches read.
type secretCaches struct {
	copies, sources cache.Cache
}

// watch wakes a fleet when a Secret it names changes in the controller's namespace (a
// rotation), and when one of its copies changes or goes (drift, put back): a copy as
// wakes.copy recognises it, never any Secret that merely carries the label.
func (c *secretCaches) watch(b *builder.Builder, fleets client.Reader, wakes fleetWakes, namespace string) *builder.Builder {
	source := &metav1.PartialObjectMetadata{}
	source.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	b = b.WatchesRawSource(crsource.Kind(c.sources, source, handler.TypedEnqueueRequestsFromMapFunc(
		func(ctx context.Context, o *metav1.PartialObjectMetadata) []reconcile.Request {
			if o.GetNamespace() != namespace {
				return nil
			}
			return fleetsNamingSecret(ctx, fleets, o.GetName())
		}), predicate.TypedResourceVersionChangedPredicate[*metav1.PartialObjectMetadata]{}))
	return b.WatchesRawSource(crsource.Kind(c.copies, &corev1.Secret{}, handler.TypedEnqueueRequestsFromMapFunc(
		func(ctx context.Context, o *corev1.Secret) []reconcile.Request { return wakes.copy(ctx, o) })))
}

// fleetsNamingSecret maps a Secret of the controller's namespace to the fleets that name it.
func fleetsNamingSecret(ctx context.Context, fleets client.Reader, name string) []reconcile.Request {
	list := &v1alpha1.HostedClusterPackageList{}
	if err := fleets.List(ctx, list, client.MatchingFields{fleetSecretField: name}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list HostedClusterPackages for a Secret change", "secret", name)
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, f := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Name: f.Name}})
	}
	return reqs
}

// sourceSecret is a Secret of the controller's namespace as the members get it.
type sourceSecret struct {
	name string
	typ  corev1.SecretType
	data map[string][]byte
}

// sources reads the Secrets the fleet names in the controller's namespace. One that is missing
// or holds nothing a member could use is left out, and its copies are kept as they are: a
// Secret deleted and created again, or written in two steps, does not take the members'
// credentials away in between. The fleet's own resolution and verification, which read the
// same Secrets, say what is wrong with them.
func (s *fleetSecrets) sources(ctx context.Context, names map[string]secretRole) ([]sourceSecret, error) {
	out := make([]sourceSecret, 0, len(names))
	for _, name := range slices.Sorted(maps.Keys(names)) {
		var secret corev1.Secret
		if err := s.apiReader.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: name}, &secret); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("read Secret %s/%s to copy it to the members: %w", s.namespace, name, err)
		}
		if data, typ, ok := copiedData(&secret, names[name]); ok {
			out = append(out, sourceSecret{name: name, typ: typ, data: data})
		}
	}
	return out, nil
}

// ownedCopies lists the fleet's copies (isFleetCopy) as reader has them, by namespace and
// name: the copies cache, or the API server (apiReader) when the fleet is deleted.
func (s *fleetSecrets) ownedCopies(ctx context.Context, reader client.Reader, fleet *v1alpha1.HostedClusterPackage) (map[copyKey]*corev1.Secret, error) {
	list := &corev1.SecretList{}
	if err := reader.List(ctx, list, client.MatchingLabels{v1alpha1.FleetLabel: fleet.Name}); err != nil {
		return nil, fmt.Errorf("list the fleet's Secret copies: %w", err)
	}
	out := map[copyKey]*corev1.Secret{}
	for i := range list.Items {
		if c := &list.Items[i]; isFleetCopy(c, fleet) {
			out[copyKey{fleet.Name, c.Namespace, c.Name}] = c
		}
	}
	return out, nil
}

// sync keeps the copies of the fleet's Secrets in the members' namespaces, written before the
// members so that a member moved in the same pass pulls with them. It returns the members whose
// copies could not be kept: a Secret of that name that is not the fleet's (SecretCollision),
// a write the API server refused (SecretCopyFailed). Copies are removed where the fleet no
// longer names their Secret, and from namespaces that have neither a member nor a member
// Package still being torn down (owned). A copy that is what it should be costs no request.
func (s *fleetSecrets) sync(ctx context.Context, fleet *v1alpha1.HostedClusterPackage, members []*rollout.Member, owned []*v1alpha1.Package) ([]v1alpha1.MemberStatus, error) {
	names := fleetSecretNames(fleet)
	sources, err := s.sources(ctx, names)
	if err != nil {
		return nil, err
	}
	existing, err := s.ownedCopies(ctx, s.copies, fleet)
	if err != nil {
		return nil, err
	}
	var problems []v1alpha1.MemberStatus
	for _, m := range members {
		for _, src := range sources {
			key := copyKey{fleet.Name, m.Namespace, src.name}
			if err := s.keepCopy(ctx, fleet, key, src, existing[key]); err != nil {
				reason := v1alpha1.SecretCopyFailedReason
				var collision *secretCollisionError
				if errors.As(err, &collision) {
					reason = v1alpha1.SecretCollisionReason
				}
				problems = append(problems, v1alpha1.MemberStatus{Namespace: m.Namespace, Partition: m.Partition, Reason: reason, Message: err.Error()})
			}
		}
	}
	keep := map[string]bool{}
	for _, m := range members {
		keep[m.Namespace] = true
	}
	for _, p := range owned {
		keep[p.Namespace] = true
	}
	for key, c := range existing {
		if _, named := names[key.name]; named && keep[key.namespace] {
			continue
		}
		if err := s.client.Delete(ctx, c, client.Preconditions{UID: &c.UID}); client.IgnoreNotFound(err) != nil {
			return problems, fmt.Errorf("delete the fleet's copy of Secret %s/%s: %w", key.namespace, key.name, err)
		}
		s.written.Drop(key)
		ctrl.LoggerFrom(ctx).Info("removed a copied Secret no member needs", "namespace", key.namespace, "secret", key.name)
	}
	return problems, nil
}

// secretCollisionError: a Secret of the name exists in the member's namespace and is not the
// fleet's.
type secretCollisionError struct {
	namespace, name string
}

func (e *secretCollisionError) Error() string {
	return fmt.Sprintf("Secret %s/%s exists and is not this fleet's copy (it does not carry the fleet's UID): it is left as it is, and the member reads it; delete it to have the fleet keep a copy of %s there",
		e.namespace, e.name, e.name)
}

// keepCopy creates or corrects one copy. cached is the fleet's copy as the cache shows it (nil
// when it shows none). A Secret of the name the cache does not show as the fleet's is read
// first, uncached: it may be one the fleet does not own (never written), or the fleet's own,
// written moments ago or stripped of its label.
func (s *fleetSecrets) keepCopy(ctx context.Context, fleet *v1alpha1.HostedClusterPackage, key copyKey, src sourceSecret, cached *corev1.Secret) error {
	current := cached
	if pending := s.pendingCopy(key, cached); pending || cached == nil {
		if pending && copyUpToDate(cached, fleet, src) {
			return nil
		}
		current = &corev1.Secret{}
		if err := s.apiReader.Get(ctx, client.ObjectKey{Namespace: key.namespace, Name: key.name}, current); err != nil {
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("read Secret %s/%s: %w", key.namespace, key.name, err)
			}
			current = nil
		}
		if current != nil && !carriesFleetUID(current, fleet) {
			return &secretCollisionError{namespace: key.namespace, name: key.name}
		}
		if pending && current != nil && copyUpToDate(current, fleet, src) {
			// Up to date as it is now: wait for the cache to show this version, not the one the
			// fleet wrote, which may have been followed by another (a label put back by hand).
			s.written.Remember(key, current.ResourceVersion)
			return nil
		}
	}
	if current != nil && copyUpToDate(current, fleet, src) {
		return nil
	}
	written, err := writeCopy(ctx, s.client, fleet, key, src, current)
	if err != nil {
		return err
	}
	s.written.Remember(key, written)
	return nil
}

// copyUpToDate reports whether a copy is what src makes of it: the same type and data, labelled
// with the fleet, its UID annotated, the fleet's ownerReference as its deletionPolicy has it
// (fleetOwners).
func copyUpToDate(c *corev1.Secret, fleet *v1alpha1.HostedClusterPackage, src sourceSecret) bool {
	if c == nil || c.Type != src.typ || len(c.Data) != len(src.data) || c.Labels[v1alpha1.FleetLabel] != fleet.Name ||
		c.Annotations[v1alpha1.FleetUIDAnnotation] != string(fleet.UID) {
		return false
	}
	for k, v := range src.data {
		if got, ok := c.Data[k]; !ok || !bytes.Equal(got, v) {
			return false
		}
	}
	return fleetOwnersUpToDate(c.OwnerReferences, fleet)
}

// writeCopy creates a copy, or replaces an existing one's data (whatever was added to it is
// drift too), and returns its resourceVersion. A Secret's type cannot change: a copy of
// another type is deleted and created again.
func writeCopy(ctx context.Context, c client.Client, fleet *v1alpha1.HostedClusterPackage, key copyKey, src sourceSecret, existing *corev1.Secret) (string, error) {
	if existing != nil && existing.Type != src.typ {
		if err := c.Delete(ctx, existing, client.Preconditions{UID: &existing.UID, ResourceVersion: &existing.ResourceVersion}); client.IgnoreNotFound(err) != nil {
			return "", fmt.Errorf("replace the copy of Secret %s/%s (type %s, now %s): %w", key.namespace, key.name, existing.Type, src.typ, err)
		}
		existing = nil
	}
	if existing == nil {
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.namespace, Name: key.name, Labels: map[string]string{v1alpha1.FleetLabel: fleet.Name},
				Annotations:     map[string]string{v1alpha1.FleetUIDAnnotation: string(fleet.UID)},
				OwnerReferences: fleetOwners(nil, fleet)},
			Type: src.typ, Data: src.data,
		}
		if err := c.Create(ctx, secret, client.FieldOwner(fleetFieldOwner)); err != nil {
			return "", fmt.Errorf("copy Secret %s to namespace %s: %w", key.name, key.namespace, err)
		}
		return secret.ResourceVersion, nil
	}
	updated := existing.DeepCopy()
	updated.Data = src.data
	if updated.Labels == nil {
		updated.Labels = map[string]string{}
	}
	updated.Labels[v1alpha1.FleetLabel] = fleet.Name
	if updated.Annotations == nil {
		updated.Annotations = map[string]string{}
	}
	updated.Annotations[v1alpha1.FleetUIDAnnotation] = string(fleet.UID)
	if !fleetOwnersUpToDate(updated.OwnerReferences, fleet) {
		updated.OwnerReferences = fleetOwners(updated.OwnerReferences, fleet)
	}
	// Optimistic concurrency: a copy changed since it was read is written on a later pass.
	if err := c.Update(ctx, updated, client.FieldOwner(fleetFieldOwner)); err != nil {
		return "", fmt.Errorf("update the copy of Secret %s/%s: %w", key.namespace, key.name, err)
	}
	return updated.ResourceVersion, nil
}

// pendingCopy reports whether the fleet wrote the copy and the cache does not show that write
// yet; a copy the cache shows as written is forgotten.
func (s *fleetSecrets) pendingCopy(key copyKey, cached *corev1.Secret) bool {
	_, pending := s.written.Pending(key, func(resourceVersion string) bool {
		return cached != nil && cached.ResourceVersion == resourceVersion
	})
	return pending
}

// forget drops what is remembered of a fleet's copies, when the fleet is gone.
func (s *fleetSecrets) forget(fleet string) {
	s.written.DropWhere(func(k copyKey) bool { return k.fleet == fleet })
}

// deleteAll deletes every copy of the fleet (deletionPolicy Delete, once the members are gone),
// as the API server lists them: the last word on the copies, which the cache may not all show.
func (s *fleetSecrets) deleteAll(ctx context.Context, fleet *v1alpha1.HostedClusterPackage) error {
	existing, err := s.ownedCopies(ctx, s.apiReader, fleet)
	if err != nil {
		return err
	}
	for key, c := range existing {
		if err := s.client.Delete(ctx, c, client.Preconditions{UID: &c.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete the fleet's copy of Secret %s/%s: %w", key.namespace, key.name, err)
		}
	}
	s.forget(fleet.Name)
	return nil
}

// release takes off its copies what ties them to the fleet (releaseFromFleet) in the
// namespaces of the members it released (deletionPolicy Orphan): they stay, for those members
// to pull and verify with. Copies elsewhere (no member to use them) are deleted. The copies are
// listed by the API server: the release is done once, and must not miss one.
func (s *fleetSecrets) release(ctx context.Context, fleet *v1alpha1.HostedClusterPackage, released map[string]bool) error {
	existing, err := s.ownedCopies(ctx, s.apiReader, fleet)
	if err != nil {
		return err
	}
	for key, c := range existing {
		if !released[key.namespace] {
			if err := s.client.Delete(ctx, c, client.Preconditions{UID: &c.UID}); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("delete the fleet's copy of Secret %s/%s: %w", key.namespace, key.name, err)
			}
			continue
		}
		if err := releaseFromFleet(ctx, s.client, s.apiReader, c, fleet); err != nil {
			return fmt.Errorf("release the copy of Secret %s/%s: %w", key.namespace, key.name, err)
		}
	}
	s.forget(fleet.Name)
	return nil
}
