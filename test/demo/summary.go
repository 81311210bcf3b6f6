package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"pkgsync.dev/pkgsync/apply"
)

// ownedObject is one object carrying pkgsync's ownership labels.
type ownedObject struct {
	Kind, Namespace, Name, Owner string
}

func (o ownedObject) String() string {
	if o.Namespace == "" {
		return o.Kind + " " + o.Name
	}
	return o.Kind + " " + o.Namespace + "/" + o.Name
}

// ownedObjects lists every object on a cluster that carries pkgsync's owner label, across all
// listable kinds, the way an administrator would look for them: by label, not by asking pkgsync.
func ownedObjects(ctx context.Context, cfg *rest.Config) ([]ownedObject, error) {
	// Listing every kind touches deprecated ones (ComponentStatus, Endpoints); their warnings
	// would only clutter the story.
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = rest.NoWarnings{}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	lists, err := dc.ServerPreferredResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return nil, fmt.Errorf("discover resources: %w", err)
	}
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("metadata client: %w", err)
	}
	var out []ownedObject
	var errs []error
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			continue
		}
		for _, res := range list.APIResources {
			if !slices.Contains(res.Verbs, "list") {
				continue
			}
			objs, err := mc.Resource(gv.WithResource(res.Name)).List(ctx, metav1.ListOptions{LabelSelector: apply.LabelOwnerName})
			if err != nil {
				errs = append(errs, fmt.Errorf("list %s: %w", res.Name, err))
				continue
			}
			for _, o := range objs.Items {
				out = append(out, ownedObject{
					Kind: res.Kind, Namespace: o.Namespace, Name: o.Name,
					Owner: o.Labels[apply.LabelOwnerKind] + " " + o.Labels[apply.LabelOwnerNamespace] + "/" + o.Labels[apply.LabelOwnerName],
				})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, errors.Join(errs...)
}
