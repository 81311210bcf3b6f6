package main

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"pkgsync.dev/pkgsync/render"
)

var (
	clusterVersionsGVR = schema.GroupVersionResource{Group: "config.openshift.io", Version: "v1", Resource: "clusterversions"}
	proxiesGVR         = schema.GroupVersionResource{Group: "config.openshift.io", Version: "v1", Resource: "proxies"}
)

// openShiftEnvironment reads, once at start-up, what templates see as
// .environment.openShift.version (the ClusterVersion "version"'s desired version) and
// .environment.proxy (the Proxy "cluster"'s status). A cluster without these APIs or objects is
// not OpenShift, or has no proxy: both are then empty, not an error.
func openShiftEnvironment(ctx context.Context, cfg *rest.Config) (string, *render.Proxy, error) {
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return "", nil, fmt.Errorf("read the OpenShift environment: %w", err)
	}
	get := func(gvr schema.GroupVersionResource, name string) (*unstructured.Unstructured, error) {
		obj, err := dc.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read %s %s: %w", gvr.GroupResource(), name, err)
		}
		return obj, nil
	}
	cv, err := get(clusterVersionsGVR, "version")
	if err != nil || cv == nil {
		return "", nil, err
	}
	version, _, _ := unstructured.NestedString(cv.Object, "status", "desired", "version")
	proxy, err := get(proxiesGVR, "cluster")
	if err != nil || proxy == nil {
		return version, nil, err
	}
	var p render.Proxy
	p.HTTPProxy, _, _ = unstructured.NestedString(proxy.Object, "status", "httpProxy")
	p.HTTPSProxy, _, _ = unstructured.NestedString(proxy.Object, "status", "httpsProxy")
	p.NoProxy, _, _ = unstructured.NestedString(proxy.Object, "status", "noProxy")
	if p == (render.Proxy{}) {
		return version, nil, nil
	}
	return version, &p, nil
}
