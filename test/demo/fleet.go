package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/test/testenv"
)

const (
	fleetName       = "demo-fleet"
	fleetRepository = "demo/fleet-app"
	waveLabel       = "rollout.example.com/wave"
)

// fleetClusters are the act's hosted clusters and their partitions: one canary, two after it.
var fleetClusters = []struct{ name, wave string }{{"canary-1", "canary"}, {"prod-1", "prod"}, {"prod-2", "prod"}}

// fleetAct is the demo's second act: one HostedClusterPackage rolls a package out to three
// hosted clusters, then rolls a new version out partition by partition, canary first.
func (d *demo) fleetAct(ctx context.Context) error {
	d.out.step("Act 2: a fleet. Three more HostedClusters, labelled %s=canary or prod", waveLabel)
	kubeconfig, err := d.hosted.ConnectorKubeconfig("pkgsync-connector")
	if err != nil {
		return err
	}
	endpoint, err := controlPlaneEndpoint(d.hosted.Config.Host)
	if err != nil {
		return err
	}
	for _, c := range fleetClusters {
		if err := createFleetCluster(ctx, d.mc, c.name, c.wave, endpoint, kubeconfig); err != nil {
			return err
		}
		d.out.say("created HostedCluster %s/%s (%s=%s), its namespace %s and connector Secret", hostedClusterNamespace, c.name, waveLabel, c.wave,
			hosted.ControlPlaneNamespace(hostedClusterNamespace, c.name))
	}

	image := d.registry.Host + "/" + fleetRepository + ":stable"
	v1, err := d.pushFleetApp(ctx, image, "1")
	if err != nil {
		return err
	}
	one := intstr.FromInt32(1)
	fleet := &v1alpha1.HostedClusterPackage{
		ObjectMeta: metav1.ObjectMeta{Name: fleetName},
		Spec: v1alpha1.HostedClusterPackageSpec{
			HostedClusterSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: waveLabel, Operator: metav1.LabelSelectorOpExists}}},
			Template:              v1alpha1.PackageTemplate{Spec: v1alpha1.PackageSpec{Image: image}},
			Rollout: v1alpha1.FleetRolloutStrategy{
				MaxUnavailable: &one,
				Partitions:     &v1alpha1.FleetPartitions{LabelKey: waveLabel, Order: &v1alpha1.PartitionOrder{Static: []string{"canary", "*"}}},
				Soak:           &metav1.Duration{Duration: 3 * time.Second},
			},
		},
	}
	d.out.step("Create HostedClusterPackage %s: partitions by %s, canary first, 1 member at a time, 3s soak", fleetName, waveLabel)
	if err := d.mc.Create(ctx, fleet); err != nil {
		return fmt.Errorf("create HostedClusterPackage %s: %w", fleetName, err)
	}
	if err := d.followFleet(ctx, v1); err != nil {
		return err
	}

	d.out.step("Push version 2 of the fleet's package to the same tag; the fleet rolls it out canary first")
	v2, err := d.pushFleetApp(ctx, image, "2")
	if err != nil {
		return err
	}
	patch := client.RawPatch("application/merge-patch+json",
		fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, meta.ReconcileRequestAnnotation, time.Now().UTC().Format(time.RFC3339Nano)))
	if err := d.mc.Patch(ctx, fleet, patch); err != nil {
		return fmt.Errorf("annotate HostedClusterPackage %s: %w", fleetName, err)
	}
	d.out.say("annotated the HostedClusterPackage %s (one HEAD request for the whole fleet)", meta.ReconcileRequestAnnotation)
	if err := d.followFleet(ctx, v2); err != nil {
		return err
	}
	d.out.plain("\nDone in %.0fs: a Package across two clusters, then a fleet of three rolled out partition by partition.", time.Since(d.out.start).Seconds())
	return nil
}

// pushFleetApp builds a one-ConfigMap package at version and pushes it with `pkgsync build --push`.
func (d *demo) pushFleetApp(ctx context.Context, image, version string) (string, error) {
	dir := filepath.Join(d.dir, "fleet-app-v"+version)
	files := map[string]string{
		"manifest.yaml": "apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata:\n  name: fleet-app\nspec:\n  phases:\n  - name: config\n",
		"config.yaml.gotmpl": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fleet-app\n  annotations:\n    pkgsync.dev/phase: config\ndata:\n" +
			"  version: \"" + version + "\"\n" +
			// `pkgsync build` validates the package without a HostedCluster: the wave is then "none".
			"  wave: {{ with index .environment \"hyperShift\" }}{{ index .hostedCluster.metadata.labels \"" + waveLabel + "\" | quote }}{{ else }}\"none\"{{ end }}\n",
	}
	for name, content := range files {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return "", err
		}
	}
	if err := d.runPkgsync(ctx, "build", dir, "--tag", image, "--push"); err != nil {
		return "", err
	}
	digest, err := d.resolveTag(ctx, fleetRepository, "stable")
	if err != nil {
		return "", err
	}
	d.out.say("version %s of the fleet's package is %s", version, digest)
	return digest, nil
}

// followFleet prints each partition's progress until every member is Ready on digest.
func (d *demo) followFleet(ctx context.Context, digest string) error {
	seen := map[string]string{}
	return poll(ctx, 100*time.Millisecond, func() (bool, error) {
		var f v1alpha1.HostedClusterPackage
		if err := d.mc.Get(ctx, client.ObjectKey{Name: fleetName}, &f); err != nil {
			return false, err
		}
		if f.Status.Target == nil || f.Status.Target.Digest != digest {
			return false, nil
		}
		for _, p := range f.Status.Partitions {
			line := fmt.Sprintf("%s %d/%d/%d", p.State, p.Updated, p.Ready, p.Total)
			if seen[p.Name] != line {
				seen[p.Name] = line
				d.out.say("partition %-7s %-11s %d of %d members updated, %d Ready", p.Name, p.State, p.Updated, p.Total, p.Ready)
			}
		}
		done := apimeta.IsStatusConditionTrue(f.Status.Conditions, meta.ReadyCondition) && f.Status.ObservedGeneration == f.Generation &&
			f.Status.Stable != nil && f.Status.Stable.Digest == digest
		if done {
			members := &v1alpha1.PackageList{}
			if err := d.mc.List(ctx, members, client.MatchingLabels{v1alpha1.FleetLabel: fleetName}); err != nil {
				return false, err
			}
			var names []string
			for _, m := range members.Items {
				names = append(names, m.Namespace)
			}
			d.out.say("HostedClusterPackage %s Ready: members %s, each pinned to %s", fleetName, strings.Join(names, ", "), digest)
		}
		return done, nil
	}, "HostedClusterPackage "+fleetName+" to be Ready on "+digest)
}

// createFleetCluster creates an Available HostedCluster with a partition label, advertising its
// hosted API server at endpoint, its hosted-control-plane namespace and connector Secret.
func createFleetCluster(ctx context.Context, c client.Client, name, wave string, endpoint map[string]any, kubeconfig []byte) error {
	hc := testenv.HostedCluster(hostedClusterNamespace, name)
	hc.SetLabels(map[string]string{waveLabel: wave})
	if err := c.Create(ctx, hc); err != nil {
		return fmt.Errorf("create HostedCluster %s/%s: %w", hostedClusterNamespace, name, err)
	}
	hc.Object["status"] = map[string]any{"controlPlaneEndpoint": endpoint, "conditions": []any{
		testenv.Condition("Available", true, "The hosted control plane is available", hc.GetGeneration()),
	}}
	if err := c.Status().Update(ctx, hc); err != nil {
		return fmt.Errorf("make HostedCluster %s/%s Available: %w", hostedClusterNamespace, name, err)
	}
	return createNamespaceWithConnector(ctx, c, hc, hosted.ControlPlaneNamespace(hostedClusterNamespace, name), kubeconfig)
}
