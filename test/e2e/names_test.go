package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// TestLongNamesRefused: the objects a Package, ObjectDeployment or fleet applies carry its name
// in the label pkgsync.dev/owner-name, whose values are at most 63 characters, and a fleet's
// members are named after it. A longer name used to be accepted, and its teardown then hung
// on a label selector the API server refuses; the API server now refuses the name itself.
// Created with a server-side dry run: the validation runs, nothing is stored.
func TestLongNamesRefused(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	image := suite.registry.Host + "/e2e/" + ns + "/names:v1"
	template := v1alpha1.ObjectSetTemplate{Spec: v1alpha1.ObjectSetTemplateSpec{
		Phases: []v1alpha1.ObjectSetPhase{{Name: "config", Objects: []v1alpha1.ObjectSetObject{inlineConfigMap(t, ns, "a")}}},
	}}
	for _, n := range []int{63, 64} {
		name := strings.Repeat("n", n)
		for _, obj := range []client.Object{
			newPackage(ns, name, image, ""),
			&v1alpha1.ClusterPackage{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.PackageSpec{Image: image}},
			&v1alpha1.ObjectDeployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: v1alpha1.ObjectDeploymentSpec{Template: template}},
			&v1alpha1.ClusterObjectDeployment{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.ObjectDeploymentSpec{Template: template}},
			&v1alpha1.HostedClusterPackage{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.HostedClusterPackageSpec{
				Template: v1alpha1.PackageTemplate{Spec: v1alpha1.PackageSpec{Image: image}}}},
		} {
			err := suite.mgmtClient.Create(t.Context(), obj, client.DryRunAll)
			kind := fmt.Sprintf("%T", obj)
			if n <= 63 {
				assert.NoError(t, err, "%s named with %d characters", kind, n)
				continue
			}
			if assert.Error(t, err, "%s named with %d characters", kind, n) {
				assert.Contains(t, err.Error(), "metadata.name is at most 63 characters", kind)
			}
		}
	}
}
