package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/source"
)

// Phases of the fleet package: the canonical hosted add-on shape of REFERENCE §0.
const (
	phaseHostedSetup = "hosted-setup"
	phaseDeploy      = "deploy"
	phaseConfigure   = "configure"
)

// payload makes every ConfigMap about as large as a small real one.
var payload = strings.Repeat("x", 512)

// writeFleetPackage writes a package of objects objects to dir: half of them (a Namespace named
// after the Package's namespace, a ServiceAccount and ConfigMaps) go to the hosted cluster in
// phases 1 and 3, the rest (a Secret, a ServiceAccount and ConfigMaps) to the management cluster
// in the Package's namespace in phase 2. Only kinds that are available once they exist, so no
// one has to play kube-controller-manager. revision changes every object's content.
func writeFleetPackage(dir string, objects int, revision string) error {
	hosted := objects / 2
	management := objects - hosted
	files := map[string]string{"manifest.yaml": fmt.Sprintf(`apiVersion: pkgsync.dev/v1alpha1
kind: PackageManifest
metadata:
  name: fleet
spec:
  scopes:
  - Namespaced
  phases:
  - name: %s
    class: %s
  - name: %s
  - name: %s
    class: %s
`, phaseHostedSetup, v1alpha1.ClassHostedCluster, phaseDeploy, phaseConfigure, v1alpha1.ClassHostedCluster)}

	var setup, deploy, configure []string
	// The hosted namespace carries the Package's namespace name, so Packages of one hosted
	// cluster would not collide, and neither do the many namespaces sharing one hosted API server here.
	setup = append(setup, object("v1", "Namespace", "{{ .package.metadata.namespace }}", "", phaseHostedSetup, revision, ""))
	setup = append(setup, object("v1", "ServiceAccount", "fleet-agent", "{{ .package.metadata.namespace }}", phaseHostedSetup, revision, ""))
	for i := range hosted - 2 {
		configure = append(configure, object("v1", "ConfigMap", fmt.Sprintf("fleet-hosted-%d", i), "{{ .package.metadata.namespace }}", phaseConfigure, revision, configMapData(revision)))
	}
	deploy = append(deploy, object("v1", "ServiceAccount", "fleet-operator", "{{ .package.metadata.namespace }}", phaseDeploy, revision, ""))
	deploy = append(deploy, object("v1", "Secret", "fleet-operator", "{{ .package.metadata.namespace }}", phaseDeploy, revision,
		"stringData:\n  token: \"{{ .package.metadata.name }}-"+revision+"\"\n"))
	for i := range management - 2 {
		deploy = append(deploy, object("v1", "ConfigMap", fmt.Sprintf("fleet-%d", i), "{{ .package.metadata.namespace }}", phaseDeploy, revision, configMapData(revision)))
	}
	files["hosted-setup.yaml.gotmpl"] = strings.Join(setup, "---\n")
	files["deploy.yaml.gotmpl"] = strings.Join(deploy, "---\n")
	if len(configure) > 0 {
		files["configure.yaml.gotmpl"] = strings.Join(configure, "---\n")
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return fmt.Errorf("write fleet package: %w", err)
		}
	}
	return nil
}

func object(apiVersion, kind, name, namespace, phase, revision, rest string) string {
	s := fmt.Sprintf("apiVersion: %s\nkind: %s\nmetadata:\n  name: %s\n", apiVersion, kind, name)
	if namespace != "" {
		s += "  namespace: " + namespace + "\n"
	}
	s += fmt.Sprintf("  labels:\n    app.kubernetes.io/name: fleet\n    app.kubernetes.io/version: %q\n  annotations:\n    %s: %s\n", revision, v1alpha1.PhaseAnnotation, phase)
	return s + rest
}

func configMapData(revision string) string {
	return fmt.Sprintf("data:\n  revision: %q\n  hostedCluster: \"{{ .package.metadata.namespace }}\"\n  payload: %q\n", revision, payload)
}

// Shapes of the benchmark's package (-shape).
const (
	shapeFleet      = "fleet"      // writeFleetPackage: half of the objects hosted
	shapeManagement = "management" // writeManagementPackage, three phases
	shapeBig        = "big"        // writeManagementPackage, one phase
)

// writeManagementPackage writes a package of objects objects for the management cluster only,
// in the Package's namespace: a ServiceAccount (phase hosted-setup), a ServiceAccount and a
// Secret (deploy), ConfigMaps (configure); with onePhase every object is in deploy. The objects
// are those managementObjects builds for the raw baseline.
func writeManagementPackage(dir string, objects int, revision string, onePhase bool) error {
	phases := []string{phaseHostedSetup, phaseDeploy, phaseConfigure}
	if onePhase {
		phases = []string{phaseDeploy, phaseDeploy, phaseDeploy}
	}
	manifest := "apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata:\n  name: fleet\nspec:\n  scopes:\n  - Namespaced\n  phases:\n"
	seen := map[string]bool{}
	for _, ph := range phases {
		if !seen[ph] {
			manifest += "  - name: " + ph + "\n"
			seen[ph] = true
		}
	}
	ns := "{{ .package.metadata.namespace }}"
	objs := []string{
		object("v1", "ServiceAccount", "fleet-agent", ns, phases[0], revision, ""),
		object("v1", "ServiceAccount", "fleet-operator", ns, phases[1], revision, ""),
		object("v1", "Secret", "fleet-operator", ns, phases[1], revision, "stringData:\n  token: \"{{ .package.metadata.namespace }}-"+revision+"\"\n"),
	}
	for i := range objects - 3 {
		objs = append(objs, object("v1", "ConfigMap", fmt.Sprintf("fleet-%d", i), ns, phases[2], revision, configMapData(revision)))
	}
	files := map[string]string{"manifest.yaml": manifest, "objects.yaml.gotmpl": strings.Join(objs, "---\n")}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return fmt.Errorf("write management package: %w", err)
		}
	}
	return nil
}

// buildFleetPackage builds the package of shape at revision into an image.
func buildFleetPackage(dir, shape string, objects int, revision string) (*source.Image, error) {
	dir = filepath.Join(dir, "package-"+revision)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create package directory: %w", err)
	}
	write := func() error { return writeFleetPackage(dir, objects, revision) }
	if shape != shapeFleet {
		write = func() error { return writeManagementPackage(dir, objects, revision, shape == shapeBig) }
	}
	if err := write(); err != nil {
		return nil, err
	}
	return source.Build(dir, source.BuildOptions{Version: revision})
}
