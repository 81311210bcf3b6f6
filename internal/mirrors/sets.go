package mirrors

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/source"
)

// +kubebuilder:rbac:groups=config.openshift.io,resources=imagedigestmirrorsets;imagetagmirrorsets,verbs=get;list;watch

// OpenShift's mirror sets (config.openshift.io/v1), cluster-scoped: which mirrors hold the
// content of which sources, for pulls by digest and by tag.
var (
	imageDigestMirrorSetGVK = schema.GroupVersionKind{Group: "config.openshift.io", Version: "v1", Kind: "ImageDigestMirrorSet"}
	imageTagMirrorSetGVK    = schema.GroupVersionKind{Group: "config.openshift.io", Version: "v1", Kind: "ImageTagMirrorSet"}
)

// mirrorSetter is what the source client offers the watch.
type mirrorSetter interface {
	SetMirrorSets(source.MirrorSets)
}

// WatchSets gives src the cluster's ImageDigestMirrorSets and ImageTagMirrorSets, where
// the cluster serves them: read once before any reconcile runs (so that a NeverContactSource
// holds from the first pull, not only once a cache has synced), then again on every change.
// Without either API, src keeps what it has (the overrides alone).
func WatchSets(ctx context.Context, mgr ctrl.Manager, src mirrorSetter) error {
	var served []schema.GroupVersionKind
	for _, gvk := range []schema.GroupVersionKind{imageDigestMirrorSetGVK, imageTagMirrorSetGVK} {
		if _, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			if apimeta.IsNoMatchError(err) {
				continue
			}
			return fmt.Errorf("look up %s: %w", gvk.Kind, err)
		}
		served = append(served, gvk)
	}
	if len(served) == 0 {
		return nil
	}
	log := ctrl.Log.WithName("mirror-sets")
	update := func(ctx context.Context, reader client.Reader) error {
		sets, err := readMirrorSets(ctx, reader, served)
		if err != nil {
			return err
		}
		src.SetMirrorSets(sets)
		log.V(1).Info("mirror sets", "digestSources", len(sets.Digest), "tagSources", len(sets.Tag))
		return nil
	}
	if err := update(ctx, mgr.GetAPIReader()); err != nil {
		return err
	}
	for _, gvk := range served {
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(gvk)
		informer, err := mgr.GetCache().GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("watch %s: %w", gvk.Kind, err)
		}
		// Every change reads every set again, from the cache: merging is over all of them.
		changed := func() {
			if err := update(ctx, mgr.GetCache()); err != nil {
				log.Error(err, "read mirror sets")
			}
		}
		if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { changed() },
			UpdateFunc: func(any, any) { changed() },
			DeleteFunc: func(any) { changed() },
		}); err != nil {
			return fmt.Errorf("watch %s: %w", gvk.Kind, err)
		}
	}
	return nil
}

// readMirrorSets lists the mirror sets of the served kinds, in name order (OpenShift leaves
// the order of merged sets unspecified), keeping the entries pkgsync can follow (wildcard
// sources, *.example.com, included): any other is skipped and logged.
func readMirrorSets(ctx context.Context, reader client.Reader, served []schema.GroupVersionKind) (source.MirrorSets, error) {
	var out source.MirrorSets
	for _, gvk := range served {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := reader.List(ctx, list); err != nil {
			return source.MirrorSets{}, fmt.Errorf("list %s: %w", gvk.Kind, err)
		}
		slices.SortFunc(list.Items, func(a, b unstructured.Unstructured) int { return strings.Compare(a.GetName(), b.GetName()) })
		field, into := "imageDigestMirrors", &out.Digest
		if gvk == imageTagMirrorSetGVK {
			field, into = "imageTagMirrors", &out.Tag
		}
		for _, item := range list.Items {
			*into = append(*into, mirrorSetsOf(item, field)...)
		}
	}
	return out, nil
}

// mirrorSetsOf reads spec.<field>[] of one mirror set object.
func mirrorSetsOf(obj unstructured.Unstructured, field string) []source.MirrorSet {
	entries, _, _ := unstructured.NestedSlice(obj.Object, "spec", field)
	var out []source.MirrorSet
	for i, e := range entries {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		src, _, _ := unstructured.NestedString(m, "source")
		mirrors, _, _ := unstructured.NestedStringSlice(m, "mirrors")
		policy, _, _ := unstructured.NestedString(m, "mirrorSourcePolicy")
		set := source.MirrorSet{Source: src, Mirrors: mirrors, NeverContactSource: policy == "NeverContactSource"}
		if err := (source.MirrorSets{Digest: []source.MirrorSet{set}}).Validate(); err != nil {
			ctrl.Log.WithName("mirror-sets").Info("mirror set entry skipped", "kind", obj.GetKind(), "name", obj.GetName(),
				"entry", fmt.Sprintf("spec.%s[%d]", field, i), "reason", err.Error())
			continue
		}
		out = append(out, set)
	}
	return out
}
