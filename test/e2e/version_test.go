package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/source"
)

// pushVersioned builds a package whose image declares version (pkgsync build --version, or
// any annotation a pusher writes) and pushes it to image.
func pushVersioned(t *testing.T, files map[string]string, image string, annotations map[string]string) string {
	t.Helper()
	img, err := source.Build(writePackage(t, files), source.BuildOptions{Annotations: annotations})
	require.NoError(t, err)
	ref, err := source.ParseReference(image)
	require.NoError(t, err)
	_, err = suite.source.Push(t.Context(), img, []source.Reference{ref}, nil)
	require.NoError(t, err)
	return img.Digest
}

// printedColumn returns the cell of the column named column of kubectl's table for the object
// at path, as the API server prints it from the CRD's printer columns (a Table request, what
// kubectl get sends).
func printedColumn(t testingT, path, column string) string {
	t.Helper()
	cfg := rest.CopyConfig(suite.mgmt.Config)
	cfg.GroupVersion = &v1alpha1.GroupVersion
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(suite.scheme).WithoutConversion()
	rc, err := rest.RESTClientFor(cfg)
	require.NoError(t, err)
	data, err := rc.Get().AbsPath(path).SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(t.Context())
	require.NoError(t, err)
	var table metav1.Table
	require.NoError(t, json.Unmarshal(data, &table))
	require.Len(t, table.Rows, 1)
	for i, c := range table.ColumnDefinitions {
		if c.Name == column {
			cell, _ := table.Rows[0].Cells[i].(string)
			return cell
		}
	}
	t.Errorf("no column %s in %v", column, table.ColumnDefinitions)
	return ""
}

// A Package following :stable shows the version its image declares beside the digest, in its
// status and in kubectl's columns; with spec.semver the chosen tag; an image that declares a
// version not fit to show (a terminal escape, a line break) shows none, and is installed as
// any other.
func TestPackageVersion(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	repo := suite.registry.Host + "/e2e/" + ns
	files := versionedPackage("1.4.2")
	stableDigest := pushVersioned(t, files, repo+"/addon:stable", map[string]string{ocispec.AnnotationVersion: "1.4.2"})
	hostileDigest := pushVersioned(t, files, repo+"/hostile:stable", map[string]string{ocispec.AnnotationVersion: "1.4.2\x1b[2J\nReady: True"})
	pushVersioned(t, files, repo+"/ranged:v1.5.0", map[string]string{ocispec.AnnotationVersion: "annotated-1.5"})

	// A namespace each: the package installs one ConfigMap.
	stable := newPackage(ns, "addon", repo+"/addon:stable", "")
	hostile := newPackage(newNamespace(t), "hostile", repo+"/hostile:stable", "")
	ranged := newPackage(newNamespace(t), "ranged", repo+"/ranged", "")
	ranged.Spec.Semver = ">=1.0.0"
	// Installed twice, the package is pulled once: the other reuses the render (or joins it
	// while it is made), and shows the version all the same.
	again := newPackage(newNamespace(t), "addon", repo+"/addon:stable", "")
	for _, p := range []*v1alpha1.Package{stable, again, hostile, ranged} {
		require.NoError(t, suite.mgmtClient.Create(t.Context(), p))
	}
	cases := []struct {
		pkg             *v1alpha1.Package
		digest, version string
	}{{stable, stableDigest, "1.4.2"}, {again, stableDigest, "1.4.2"}, {hostile, hostileDigest, ""}, {ranged, "", "v1.5.0"}}
	for _, tc := range cases {
		eventually(t, func(a *attempt) {
			c := readyCondition(a, tc.pkg)
			if !assert.NotNil(a, c) {
				return
			}
			assert.Equal(a, metav1.ConditionTrue, c.Status, c.Message)
			if tc.digest != "" {
				assert.Equal(a, tc.digest, tc.pkg.Status.LastAppliedRevision)
			}
			assert.Equal(a, tc.version, tc.pkg.Status.LastAppliedVersion)
			assert.Equal(a, tc.version, tc.pkg.Status.LastAttemptedVersion)
		}, "%s shows version %q", tc.pkg.Name, tc.version)
		assert.Equal(t, tc.version, printedColumn(t, "/apis/pkgsync.dev/v1alpha1/namespaces/"+tc.pkg.Namespace+"/packages/"+tc.pkg.Name, "Version"))
	}
}

// A fleet following :stable shows the version of its target, as its first member reported it
// from the image it pulled, in its status and kubectl's columns; the stable revision keeps it.
func TestFleetVersion(t *testing.T) {
	t.Parallel()
	hcNamespace := newNamespace(t)
	newFleetClusters(t, hcNamespace, hcNamespace, "canary", "prod")
	repo := suite.registry.Host + "/fleet/" + hcNamespace
	digest := pushVersioned(t, fleetPackage("1.4.2", false), repo+":stable", map[string]string{ocispec.AnnotationVersion: "1.4.2"})
	fleet := &v1alpha1.HostedClusterPackage{
		ObjectMeta: metav1.ObjectMeta{Name: "version-" + hcNamespace[len(hcNamespace)-8:]},
		Spec: v1alpha1.HostedClusterPackageSpec{
			HostedClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"e2e.pkgsync.dev/fleet": hcNamespace}},
			Template:              v1alpha1.PackageTemplate{Spec: v1alpha1.PackageSpec{Image: repo + ":stable", Interval: &metav1.Duration{Duration: time.Hour}}},
			Rollout:               v1alpha1.FleetRolloutStrategy{Partitions: &v1alpha1.FleetPartitions{LabelKey: "rollout-wave"}},
		},
	}
	newFleet(t, fleet)
	got := waitForFleet(t, fleet.Name, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, digest)
	require.NotNil(t, got.Status.Target)
	assert.Equal(t, "1.4.2", got.Status.Target.Version)
	require.NotNil(t, got.Status.Stable)
	assert.Equal(t, "1.4.2", got.Status.Stable.Version)
	assert.Equal(t, "1.4.2", printedColumn(t, "/apis/pkgsync.dev/v1alpha1/hostedclusterpackages/"+fleet.Name, "Version"))
	assert.True(t, strings.HasPrefix(printedColumn(t, "/apis/pkgsync.dev/v1alpha1/hostedclusterpackages/"+fleet.Name, "Target"), strings.TrimPrefix(digest, "sha256:")[:12]))
}
