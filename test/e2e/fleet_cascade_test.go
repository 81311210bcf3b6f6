package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/test/testenv"
)

// cascadeCluster is where a fleet's deletion under each cascade is tried: the suite's bare
// management plane, whose garbage collector the test plays (TestFleetDeletionUnderCascade), or
// the real cluster, whose collector is kube-controller-manager's (TestFleetDeletionCascades).
type cascadeCluster struct {
	c client.Client
	// wait bounds each wait.
	wait time.Duration
	// shard labels an object for the controller that serves the scenario (none: every object).
	shard map[string]string
	// controllerNS is that controller's namespace, where the fleet's pull Secret is.
	controllerNS string
	// namespace makes a namespace, emptied and deleted when the test ends.
	namespace func(t *testing.T) string
	// hostedClusters makes n Available HostedClusters, their hosted-control-plane namespaces
	// (returned) and the labels that select them all.
	hostedClusters func(t *testing.T, n int) (selector map[string]string, hcps []string)
	// createFleet creates the fleet, deleted (and waited for) when the test ends.
	createFleet func(t *testing.T, fleet *v1alpha1.HostedClusterPackage)
	// cleanup deletes obj when the test ends, while the controller still runs, and waits until
	// it is gone.
	cleanup func(t *testing.T, obj client.Object)
}

// cascadeFleet is a fleet over three HostedClusters, with the objects of others that carry its
// label beside its own (the decoys): in a tenant's namespace a Package named like the fleet and
// a Secret named like its copy, both labelled pkgsync.dev/fleet=<fleet>, the Secret with a
// guessed pkgsync.dev/fleet-uid; and, in the hosted-control-plane namespace of the third
// HostedCluster, which the fleet selects, a labelled Package of the fleet's name that the fleet
// did not write (that cluster gets no member: Collision) and a labelled Secret of its copy's
// name. None of them is the fleet's, whatever its label, name and namespace say: none may be
// written, released or deleted. A Secret of the test's with an ownerReference to the fleet, the
// sentinel, shows what the garbage collector did with the fleet's dependents.
type cascadeFleet struct {
	cc    *cascadeCluster
	fleet *v1alpha1.HostedClusterPackage
	// members are the namespaces of the fleet's members.
	members []string
	decoys  []client.Object
	// pull is the name of the Secret the fleet copies, pullConfig what it holds.
	pull       string
	pullConfig []byte
	sentinel   *corev1.Secret
}

// newCascadeFleet creates the fleet (with policy) and the decoys, and waits until the members
// are Ready on what they installed and their copies are in place.
func (cc *cascadeCluster) newCascadeFleet(t *testing.T, policy v1alpha1.FleetDeletionPolicy) *cascadeFleet {
	t.Helper()
	selector, hcps := cc.hostedClusters(t, 3)
	require.Len(t, hcps, 3)
	slices.Sort(hcps)
	tenantNS := cc.namespace(t)
	suffix := fmt.Sprintf("%d-%d", time.Now().UnixNano()%100000, nsCounter.Add(1))
	image := suite.registry.Host + "/e2e/cascade/" + suffix + "/addon:stable"
	digest := pushPackageTo(t, writePackage(t, fleetPackage("1", false)), image)
	cf := &cascadeFleet{cc: cc, members: hcps[:2], pull: "pull-" + suffix, pullConfig: dockerConfig(suite.registry.Host, "anyone", "anything")}
	taken := hcps[2]

	pull := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cc.controllerNS, Name: cf.pull}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: cf.pullConfig}}
	require.NoError(t, cc.c.Create(t.Context(), pull))
	t.Cleanup(func() {
		assert.NoError(t, client.IgnoreNotFound(cc.c.Delete(context.WithoutCancel(t.Context()), pull)))
	})

	cf.fleet = &v1alpha1.HostedClusterPackage{
		ObjectMeta: metav1.ObjectMeta{Name: "cascade-" + suffix, Labels: cc.shard},
		Spec: v1alpha1.HostedClusterPackageSpec{
			HostedClusterSelector: &metav1.LabelSelector{MatchLabels: selector},
			Template: v1alpha1.PackageTemplate{
				Metadata: v1alpha1.TemplateMetadata{Labels: cc.shard},
				Spec:     v1alpha1.PackageSpec{Image: image, PullSecretRef: &meta.LocalObjectReference{Name: cf.pull}},
			},
			DeletionPolicy: policy,
		},
	}
	// The decoy Packages are the controller's to reconcile, so that the fleet's caches hold
	// them as they hold its members; suspended, they apply nothing.
	fleetLabel := map[string]string{v1alpha1.FleetLabel: cf.fleet.Name}
	for k, v := range cc.shard {
		fleetLabel[k] = v
	}
	decoyPackage := func(ns string, annotations map[string]string) *v1alpha1.Package {
		return &v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cf.fleet.Name, Labels: fleetLabel, Annotations: annotations},
			Spec: v1alpha1.PackageSpec{Image: image, Suspend: true}}
	}
	decoySecret := func(ns string, annotations map[string]string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cf.pull, Labels: map[string]string{v1alpha1.FleetLabel: cf.fleet.Name}, Annotations: annotations},
			Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)}}
	}
	guessed := map[string]string{v1alpha1.FleetUIDAnnotation: "00000000-0000-0000-0000-000000000000"}
	cf.decoys = []client.Object{decoyPackage(tenantNS, guessed), decoySecret(tenantNS, guessed), decoyPackage(taken, nil), decoySecret(taken, nil)}
	for _, d := range cf.decoys {
		require.NoError(t, cc.c.Create(t.Context(), d))
	}
	cc.createFleet(t, cf.fleet)
	// After the fleet: cleanups run last in, first out, and the fleet's may wait for every
	// Package labelled with it to be gone.
	for _, d := range cf.decoys {
		cc.cleanup(t, d)
	}
	cf.sentinel = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: "sentinel", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.HostedClusterPackageKind, Name: cf.fleet.Name, UID: cf.fleet.UID}}}}
	require.NoError(t, cc.c.Create(t.Context(), cf.sentinel))

	eventuallyFor(t, t.Context(), cc.wait, func(a *attempt) {
		fleet := &v1alpha1.HostedClusterPackage{}
		if !assert.NoError(a, cc.c.Get(a.Context(), client.ObjectKeyFromObject(cf.fleet), fleet)) {
			return
		}
		assert.Equal(a, fleet.Generation, fleet.Status.ObservedGeneration)
		if assert.NotNil(a, fleet.Status.Target) {
			assert.Equal(a, digest, fleet.Status.Target.Digest)
		}
		assert.True(a, slices.ContainsFunc(fleet.Status.FailedMembers, func(m v1alpha1.MemberStatus) bool {
			return m.Namespace == taken && m.Reason == v1alpha1.CollisionReason
		}), "the cluster whose namespace holds another Package of the fleet's name gets no member: %+v", fleet.Status.FailedMembers)
		for _, ns := range cf.members {
			member := &v1alpha1.Package{}
			if assert.NoError(a, cc.c.Get(a.Context(), client.ObjectKey{Namespace: ns, Name: cf.fleet.Name}, member), "member %s", ns) {
				ready := apimeta.FindStatusCondition(member.Status.Conditions, meta.ReadyCondition)
				assert.True(a, ready != nil && ready.Status == metav1.ConditionTrue && member.Status.ObservedGeneration == member.Generation, "member %s Ready: %v", ns, ready)
			}
			assertFleetCopyOn(a, cc.c, fleet, ns, cf.pull, corev1.SecretTypeDockerConfigJson, map[string][]byte{corev1.DockerConfigJsonKey: cf.pullConfig})
			assert.True(a, exists(a, cc.c, "v1", "ConfigMap", ns, "fleet-app"), "member %s installed its ConfigMap", ns)
		}
	}, "the members of %s are Ready and their copies in place", cf.fleet.Name)
	require.NoError(t, cc.c.Get(t.Context(), client.ObjectKeyFromObject(cf.fleet), cf.fleet))
	for _, d := range cf.decoys {
		require.NoError(t, cc.c.Get(t.Context(), client.ObjectKeyFromObject(d), d))
	}
	if policy == v1alpha1.FleetDeletionOrphan {
		// The orphans are the test's to delete, while the controller still runs.
		for _, ns := range cf.members {
			cc.cleanup(t, &v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cf.fleet.Name}})
		}
	}
	return cf
}

// waitGone waits until the fleet is gone.
func (cf *cascadeFleet) waitGone(t *testing.T) {
	t.Helper()
	eventuallyFor(t, t.Context(), cf.cc.wait, func(a *attempt) {
		err := cf.cc.c.Get(a.Context(), client.ObjectKeyFromObject(cf.fleet), &v1alpha1.HostedClusterPackage{})
		assert.True(a, apierrors.IsNotFound(err), "fleet gone: %v", err)
	}, "the fleet %s is gone", cf.fleet.Name)
}

// assertDeleted checks what is left once the fleet (deleted with cascade) is gone. First the
// sentinel shows that the garbage collector has been through the fleet's dependents: taken its
// ownerReference off (orphan), or deleted it. Then with Delete, none of the fleet's members, what
// they installed or its copies is left; with Orphan, every member is, installed, Ready and
// released (nothing of the fleet on it: label, annotations, ownerReference), and every copy,
// released too. Either way the decoys are as they were, and nothing else carries the fleet's
// label.
func (cf *cascadeFleet) assertDeleted(t *testing.T, cascade metav1.DeletionPropagation) {
	t.Helper()
	c := cf.cc.c
	eventuallyFor(t, t.Context(), cf.cc.wait, func(a *attempt) {
		got := &corev1.Secret{}
		err := c.Get(a.Context(), client.ObjectKeyFromObject(cf.sentinel), got)
		if cascade == metav1.DeletePropagationOrphan {
			if assert.NoError(a, err, "an orphan dependent stays") {
				assert.Empty(a, got.OwnerReferences, "the collector took the ownerReference off")
			}
			return
		}
		assert.True(a, apierrors.IsNotFound(err), "the collector deleted the dependent: %v", err)
	}, "the garbage collector has been through the fleet's dependents (%s)", cascade)

	if cf.fleet.Spec.GetDeletionPolicy() == v1alpha1.FleetDeletionDelete {
		eventuallyFor(t, t.Context(), cf.cc.wait, func(a *attempt) {
			for _, ns := range cf.members {
				err := c.Get(a.Context(), client.ObjectKey{Namespace: ns, Name: cf.fleet.Name}, &v1alpha1.Package{})
				assert.True(a, apierrors.IsNotFound(err), "member %s deleted: %v", ns, err)
				assert.False(a, exists(a, c, "v1", "ConfigMap", ns, "fleet-app"), "what member %s installed is torn down", ns)
				err = c.Get(a.Context(), client.ObjectKey{Namespace: ns, Name: cf.pull}, &corev1.Secret{})
				assert.True(a, apierrors.IsNotFound(err), "copy in %s deleted: %v", ns, err)
			}
		}, "the members and the copies go with the fleet")
	} else {
		for _, ns := range cf.members {
			pkg := &v1alpha1.Package{}
			if assert.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: cf.fleet.Name}, pkg), "member %s kept", ns) {
				assertReleased(t, cf.fleet, pkg)
				assert.Nil(t, pkg.DeletionTimestamp, "member %s is not being deleted", ns)
				ready := apimeta.FindStatusCondition(pkg.Status.Conditions, meta.ReadyCondition)
				assert.True(t, ready != nil && ready.Status == metav1.ConditionTrue, "orphan %s Ready: %v", ns, ready)
			}
			cm := &corev1.ConfigMap{}
			if assert.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "fleet-app"}, cm), "what member %s installed stays", ns) {
				assert.Equal(t, "1", cm.Data["version"])
			}
			copied := &corev1.Secret{}
			if assert.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: cf.pull}, copied), "copy in %s kept", ns) {
				assertReleased(t, cf.fleet, copied)
				assert.Equal(t, map[string][]byte{corev1.DockerConfigJsonKey: cf.pullConfig}, copied.Data, "the copy in %s, for the orphan to pull with", ns)
			}
		}
	}
	for _, d := range cf.decoys {
		assertUntouched(t, c, d)
	}
	// Nothing but the decoys is left labelled with the fleet.
	decoys := map[string]bool{}
	for _, d := range cf.decoys {
		decoys[fmt.Sprintf("%T %s", d, client.ObjectKeyFromObject(d))] = true
	}
	for _, list := range []client.ObjectList{&v1alpha1.PackageList{}, &corev1.SecretList{}} {
		require.NoError(t, c.List(t.Context(), list, client.MatchingLabels{v1alpha1.FleetLabel: cf.fleet.Name}))
		require.NoError(t, apimeta.EachListItem(list, func(o runtime.Object) error {
			obj := o.(client.Object)
			key := fmt.Sprintf("%T %s", obj, client.ObjectKeyFromObject(obj))
			assert.True(t, decoys[key], "%s is left labelled %s=%s", key, v1alpha1.FleetLabel, cf.fleet.Name)
			return nil
		}))
	}
}

// assertUntouched checks that what the fleet could change of before is as it was: a Secret
// not written at all (no controller writes it), a Package (its own controller writes its
// finalizer and status) with the same labels, annotations, owners and spec, not deleted.
func assertUntouched(t *testing.T, c client.Client, before client.Object) {
	t.Helper()
	key := client.ObjectKeyFromObject(before)
	now := before.DeepCopyObject().(client.Object)
	if !assert.NoError(t, c.Get(t.Context(), key, now), "%T %s kept", before, key) {
		return
	}
	assert.Nil(t, now.GetDeletionTimestamp(), "%T %s is not being deleted", before, key)
	assert.Equal(t, before.GetLabels(), now.GetLabels(), "%T %s: labels", before, key)
	assert.Equal(t, before.GetAnnotations(), now.GetAnnotations(), "%T %s: annotations", before, key)
	assert.Equal(t, before.GetOwnerReferences(), now.GetOwnerReferences(), "%T %s: owners", before, key)
	switch b := before.(type) {
	case *corev1.Secret:
		assert.Equal(t, b.ResourceVersion, now.GetResourceVersion(), "Secret %s is not written", key)
	case *v1alpha1.Package:
		assert.Equal(t, b.Spec, now.(*v1alpha1.Package).Spec, "Package %s: spec", key)
	}
}

// assertReleased checks that obj carries nothing of the fleet any more.
func assertReleased(t testingT, fleet *v1alpha1.HostedClusterPackage, obj client.Object) {
	t.Helper()
	key := client.ObjectKeyFromObject(obj)
	assert.NotContains(t, obj.GetLabels(), v1alpha1.FleetLabel, "%T %s", obj, key)
	for _, a := range []string{v1alpha1.FleetUIDAnnotation, v1alpha1.FleetRevisionAnnotation, v1alpha1.FleetRevisionTimeAnnotation} {
		assert.NotContains(t, obj.GetAnnotations(), a, "%T %s", obj, key)
	}
	for _, ref := range obj.GetOwnerReferences() {
		assert.NotEqual(t, fleet.UID, ref.UID, "%T %s is still owned by the fleet", obj, key)
	}
}

// TestFleetDeletionCascades: each deletionPolicy under each kubectl delete --cascade on the
// real cluster, whose garbage collector (kube-controller-manager's) acts at the same time as
// pkgsync: Delete removes every member, what it installed and every copy; Orphan keeps every
// member and copy, released; the decoys are never touched (cascadeFleet). Before pkgsync.dev/fleet-uid
// and Orphan's members without an ownerReference, --cascade=orphan left the copies (and
// with Orphan the label) behind and --cascade=foreground deleted Orphan's members.
func TestFleetDeletionCascades(t *testing.T) {
	t.Parallel()
	env := useCluster(t)
	cc := &cascadeCluster{c: env.client, wait: clusterTimeout, controllerNS: env.controllerNamespace,
		namespace:   func(t *testing.T) string { return env.namespace(t, nil) },
		createFleet: func(t *testing.T, fleet *v1alpha1.HostedClusterPackage) { env.create(t, fleet) },
		cleanup: func(t *testing.T, obj client.Object) {
			t.Cleanup(func() {
				require.NoError(t, client.IgnoreNotFound(env.client.Delete(context.WithoutCancel(t.Context()), obj)))
				env.waitGone(t, obj)
			})
		},
	}
	// The package is the management cluster's alone: the hosted clusters' connector Secrets are
	// never used, and all hold the suite's admin kubeconfig (no user provisioned per cluster).
	kubeconfig, err := testenv.KubeconfigFor("cascade", suite.hosted.Config)
	require.NoError(t, err)
	cc.hostedClusters = func(t *testing.T, n int) (map[string]string, []string) {
		selector := map[string]string{"e2e.pkgsync.dev/fleet": fmt.Sprintf("cascade-%d-%d", time.Now().UnixNano()%100000, nsCounter.Add(1))}
		var hcps []string
		for range n {
			_, hcp := env.hostedControlPlane(t, kubeconfig, selector)
			hcps = append(hcps, hcp)
		}
		return selector, hcps
	}
	for _, policy := range []v1alpha1.FleetDeletionPolicy{v1alpha1.FleetDeletionDelete, v1alpha1.FleetDeletionOrphan} {
		for _, cascade := range []metav1.DeletionPropagation{metav1.DeletePropagationBackground, metav1.DeletePropagationForeground, metav1.DeletePropagationOrphan} {
			t.Run(fmt.Sprintf("%s/%s", policy, cascade), func(t *testing.T) {
				t.Parallel()
				cf := cc.newCascadeFleet(t, policy)
				require.NoError(t, env.client.Delete(t.Context(), cf.fleet, client.PropagationPolicy(cascade)))
				cf.waitGone(t)
				cf.assertDeleted(t, cascade)
			})
		}
	}
}
