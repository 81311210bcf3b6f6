package config

import (
	"errors"
	"fmt"
	"io/fs"
	"path"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/kustomize/api/krusty"
	kustypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

const (
	// DefaultNamespace is the namespace config/default installs the controller in.
	DefaultNamespace = "pkgsync-system"
	// DeploymentName is the name of the controller Deployment.
	DeploymentName = "pkgsync-controller"
	// ContainerName is the controller's container in the Deployment.
	ContainerName = "manager"
)

// CRDGroupKind is the kind of CustomResourceDefinitions, which an install applies first.
var CRDGroupKind = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}

// Variant is the kustomization an install is built from.
type Variant string

const (
	// Default is config/default: what `kubectl apply -k config/default` installs.
	Default Variant = "default"
	// Lockdown is config/lockdown, for management clusters shared with tenants: config/default
	// with the controller started so that namespaced resources never act as the controller
	// (docs/operations.md, security model).
	Lockdown Variant = "lockdown"
)

// Options select what Render builds and changes.
type Options struct {
	// Variant is the kustomization to build; empty is Default.
	Variant Variant
	// Namespace the controller runs in (the Namespace object, the Deployment, the
	// ServiceAccount and the subjects that bind it). Empty keeps DefaultNamespace.
	Namespace string
	// Image of the controller container. Empty keeps the image config/manager names.
	Image string
}

// Render builds config/VARIANT as `kubectl apply -k config/VARIANT` would, with opts applied,
// and returns the objects in kustomize's order.
func Render(opts Options) ([]*unstructured.Unstructured, error) {
	variant := opts.Variant
	if variant == "" {
		variant = Default
	}
	if variant != Default && variant != Lockdown {
		return nil, fmt.Errorf("unknown install variant %q: want %s or %s", variant, Default, Lockdown)
	}
	fsys, err := stage()
	if err != nil {
		return nil, err
	}
	dir := "/config/" + string(variant)
	if opts.Namespace != "" && opts.Namespace != DefaultNamespace {
		if errs := validation.IsDNS1123Label(opts.Namespace); len(errs) > 0 {
			return nil, fmt.Errorf("namespace %q: %s", opts.Namespace, errs[0])
		}
		// An overlay, as a user's kustomization would be: kustomize moves the namespaced objects,
		// renames the Namespace object and updates the ServiceAccount subjects of the bindings.
		overlay, err := yaml.Marshal(kustypes.Kustomization{
			TypeMeta:  kustypes.TypeMeta{APIVersion: kustypes.KustomizationVersion, Kind: kustypes.KustomizationKind},
			Resources: []string{"../config/" + string(variant)},
			Namespace: opts.Namespace,
		})
		if err != nil {
			return nil, err
		}
		if err := fsys.WriteFile("/install/kustomization.yaml", overlay); err != nil {
			return nil, err
		}
		dir = "/install"
	}
	kopts := krusty.MakeDefaultOptions()
	kopts.LoadRestrictions = kustypes.LoadRestrictionsRootOnly
	kopts.PluginConfig = kustypes.DisabledPluginConfig()
	kopts.AddManagedbyLabel = false
	resources, err := krusty.MakeKustomizer(kopts).Run(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build of the embedded config/%s: %w", variant, err)
	}
	var objs []*unstructured.Unstructured
	for _, r := range resources.Resources() {
		// Through JSON: kyaml decodes integers as int, which unstructured objects must not hold.
		js, err := r.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("kustomize build of the embedded config/%s: %s: %w", variant, r.CurId(), err)
		}
		var m map[string]any
		if err := utiljson.Unmarshal(js, &m); err != nil {
			return nil, fmt.Errorf("kustomize build of the embedded config/%s: %s: %w", variant, r.CurId(), err)
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	if opts.Image != "" {
		if err := setImage(objs, opts.Image); err != nil {
			return nil, err
		}
	}
	return objs, nil
}

// stage copies the embedded files into an in-memory file system under /config, so kustomize
// reads nothing from disk.
func stage() (filesys.FileSystem, error) {
	fsys := filesys.MakeFsInMemory()
	err := fs.WalkDir(files, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := files.ReadFile(name)
		if err != nil {
			return err
		}
		return fsys.WriteFile(path.Join("/config", name), data)
	})
	if err != nil {
		return nil, fmt.Errorf("stage the embedded config: %w", err)
	}
	return fsys, nil
}

// setImage sets the image of the controller container.
func setImage(objs []*unstructured.Unstructured, image string) error {
	for _, obj := range objs {
		if obj.GetKind() != "Deployment" || obj.GetName() != DeploymentName {
			continue
		}
		containers, _, err := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
		if err != nil {
			return fmt.Errorf("the embedded Deployment %s: %w", DeploymentName, err)
		}
		for i, c := range containers {
			if m, ok := c.(map[string]any); ok && m["name"] == ContainerName {
				m["image"] = image
				containers[i] = m
				return unstructured.SetNestedSlice(obj.Object, containers, "spec", "template", "spec", "containers")
			}
		}
	}
	return errors.New("the embedded config/manager has no Deployment " + DeploymentName + " with a container " + ContainerName)
}
