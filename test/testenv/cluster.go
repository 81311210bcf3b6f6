package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// Cluster is a control plane with what a real cluster runs beside its API server:
// kube-controller-manager (the garbage collector, namespace lifecycle, Deployments and
// ReplicaSets, Jobs and their TTL, ClusterRole aggregation, autoscaling and the rest of its
// default controllers), kube-scheduler, and KWOK's simulated nodes, which report the pods the
// scheduler places on them running and ready without running their containers.
//
// Use it where behaviour depends on those controllers; a bare ControlPlane starts faster and
// lets a test write the status a controller would.
type Cluster struct {
	*ControlPlane
	// Nodes names the simulated nodes.
	Nodes []string

	components []*process
	// nodeResources are the capacity and allocatable resources of each node.
	nodeResources corev1.ResourceList
}

// ClusterOptions configure a cluster.
type ClusterOptions struct {
	ControlPlaneOptions
	// Nodes is the number of simulated nodes; 2 when zero.
	Nodes int
	// NodeCPU and NodeMemory are what each node can give its pods (its allocatable resources):
	// 4 CPUs and 16Gi when empty, so that a pod asking for more fits on no node.
	NodeCPU, NodeMemory string
}

// NodeLabel is the label every simulated node carries (value "true"), for node selectors.
const NodeLabel = "testenv.pkgsync.dev/simulated"

// clusterReadyTimeout bounds the start of a cluster's components, until a pod runs.
const clusterReadyTimeout = 90 * time.Second

// StartCluster starts a cluster: the control plane, then its controllers, scheduler and
// simulated nodes, and returns once a pod can be scheduled and run. Its files (kubeconfigs,
// logs of each component) are under dir.
func StartCluster(ctx context.Context, name, dir string, opts ClusterOptions) (_ *Cluster, err error) {
	bins := map[string]string{}
	for _, b := range []string{"kube-controller-manager", "kube-scheduler", "kwok", "kwok-stages.yaml"} {
		if bins[b], err = binary(b); err != nil {
			return nil, err
		}
	}
	cp, err := StartControlPlaneWith(name, dir, opts.ControlPlaneOptions)
	if err != nil {
		return nil, err
	}
	c := &Cluster{ControlPlane: cp}
	defer func() {
		if err != nil {
			_ = c.Stop()
		}
	}()
	caFile := filepath.Join(dir, name+"-ca.crt")
	if err := os.WriteFile(caFile, cp.Config.CAData, 0o600); err != nil {
		return nil, fmt.Errorf("write CA of %s: %w", name, err)
	}
	// The controller manager and KWOK act as a cluster-admin would; the scheduler as itself,
	// through the RBAC roles kube-apiserver bootstraps for it.
	kcm, err := c.componentKubeconfig(dir, "system:kube-controller-manager", "system:masters")
	if err != nil {
		return nil, err
	}
	scheduler, err := c.componentKubeconfig(dir, "system:kube-scheduler")
	if err != nil {
		return nil, err
	}
	kwok, err := c.componentKubeconfig(dir, "kwok-controller", "system:masters")
	if err != nil {
		return nil, err
	}
	saKey := filepath.Join(cp.env.ControlPlane.GetAPIServer().CertDir, "sa-signer.key")
	starts := []struct {
		name string
		bin  string
		args []string
	}{
		{"kube-controller-manager", bins["kube-controller-manager"], []string{
			"--kubeconfig=" + kcm, "--leader-elect=false", "--secure-port=0",
			"--controllers=*", "--root-ca-file=" + caFile, "--service-account-private-key-file=" + saKey,
			// The test clusters' nodes live only as long as a test: evict from a node that stops
			// reporting soon, as in a small cluster.
			"--node-monitor-grace-period=20s", "-v=1",
		}},
		{"kube-scheduler", bins["kube-scheduler"], []string{
			"--kubeconfig=" + scheduler, "--leader-elect=false", "--secure-port=0", "-v=1",
		}},
		{"kwok", bins["kwok"], []string{
			"--kubeconfig=" + kwok, "--config=" + bins["kwok-stages.yaml"], "--manage-all-nodes=true",
			"--node-lease-duration-seconds=40", "--cidr=10.244.0.0/16",
		}},
	}
	for _, s := range starts {
		p, err := startProcess(s.name, filepath.Join(dir, name+"-"+s.name+".log"), s.bin, s.args...)
		if err != nil {
			return nil, err
		}
		c.components = append(c.components, p)
	}
	if err := c.addNodes(ctx, opts); err != nil {
		return nil, err
	}
	if err := c.waitReady(ctx); err != nil {
		return nil, fmt.Errorf("%s cluster: %w (component logs in %s)", name, err, dir)
	}
	return c, nil
}

// NewCluster starts a cluster for a test and stops it when the test ends.
func NewCluster(t testing.TB, name string, opts ClusterOptions) *Cluster {
	t.Helper()
	c, err := StartCluster(context.Background(), name, t.TempDir(), opts)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("testenv: %v", err)
		}
	})
	return c
}

// componentKubeconfig provisions a client-certificate user for a component and writes its
// kubeconfig into dir.
func (c *Cluster) componentKubeconfig(dir, user string, groups ...string) (string, error) {
	data, err := c.Kubeconfig(user, groups...)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, c.Name+"-"+filepath.Base(user)+".kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", fmt.Errorf("write kubeconfig of %s: %w", user, err)
	}
	return path, nil
}

// addNodes registers the simulated nodes; KWOK finds them, reports them Ready and keeps
// their leases, as a kubelet would.
func (c *Cluster) addNodes(ctx context.Context, opts ClusterOptions) error {
	n := opts.Nodes
	if n == 0 {
		n = 2
	}
	cpu, memory := opts.NodeCPU, opts.NodeMemory
	if cpu == "" {
		cpu = "4"
	}
	if memory == "" {
		memory = "16Gi"
	}
	resources := corev1.ResourceList{}
	for k, v := range map[corev1.ResourceName]string{corev1.ResourceCPU: cpu, corev1.ResourceMemory: memory, corev1.ResourcePods: "110"} {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return fmt.Errorf("node %s %q: %w", k, v, err)
		}
		resources[k] = q
	}
	c.nodeResources = resources
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	for i := range n {
		name := c.Name + "-node-" + strconv.Itoa(i)
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name,
				Labels:      map[string]string{corev1.LabelHostname: name, corev1.LabelOSStable: "linux", NodeLabel: "true"},
				Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
		}
		if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create node %s: %w", name, err)
		}
		// The capacity is the node's to report: set in status, which KWOK keeps. KWOK writes the
		// new node's status too: a conflict reads the node again.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			live, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			live.Status.Capacity, live.Status.Allocatable = resources, resources
			_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, live, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("set capacity of node %s: %w", name, err)
		}
		c.Nodes = append(c.Nodes, name)
	}
	return nil
}

// waitReady waits until the components are up: KWOK reports every node Ready with the capacity
// addNodes gave it, the controller manager has given the default namespace its ServiceAccount,
// and a pod is scheduled onto a node that reports it running.
func (c *Cluster) waitReady(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, clusterReadyTimeout)
	defer cancel()
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "testenv-ready", Namespace: metav1.NamespaceDefault},
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10"}},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
		},
	}
	var last error
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, p := range c.components {
			if p.exited() {
				return false, fmt.Errorf("%s exited; see %s", p.name, p.log.Name())
			}
		}
		if err := c.nodesReady(ctx, cs); err != nil {
			last = err
			return false, nil
		}
		if _, err := cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{}); err != nil {
			last = fmt.Errorf("kube-controller-manager has not created the default ServiceAccount: %w", err)
			return false, nil
		}
		pod, err := cs.CoreV1().Pods(probe.Namespace).Get(ctx, probe.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = cs.CoreV1().Pods(probe.Namespace).Create(ctx, probe, metav1.CreateOptions{})
			last = err
			return false, nil
		}
		if err != nil {
			last = err
			return false, nil
		}
		if pod.Status.Phase != corev1.PodRunning {
			last = fmt.Errorf("pod %s is %q on node %q", probe.Name, pod.Status.Phase, pod.Spec.NodeName)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return errors.Join(err, last)
	}
	if err := cs.CoreV1().Pods(probe.Namespace).Delete(ctx, probe.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete pod %s: %w", probe.Name, err)
	}
	return nil
}

// nodesReady reports whether every node is Ready, as KWOK reports it, with the capacity addNodes
// gave it, and gives a Ready node that capacity again where KWOK wrote its own over it. KWOK's
// node-initialize stage writes a new node's status from its last read of the node: when that read
// came before addNodes set the capacity (KWOK slow to catch up, on a busy machine), the node gets
// KWOK's defaults, 1000 CPUs, and every pod fits on it. The stage runs until the node is Ready,
// and no more then.
func (c *Cluster) nodesReady(ctx context.Context, cs kubernetes.Interface) error {
	for _, name := range c.Nodes {
		node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		ready := false
		for _, cond := range node.Status.Conditions {
			ready = ready || (cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue)
		}
		if !ready {
			return fmt.Errorf("node %s is not Ready", name)
		}
		if hasResources(node.Status.Capacity, c.nodeResources) && hasResources(node.Status.Allocatable, c.nodeResources) {
			continue
		}
		node.Status.Capacity, node.Status.Allocatable = c.nodeResources, c.nodeResources
		if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("set capacity of node %s again: %w", name, err)
		}
		return fmt.Errorf("node %s had KWOK's capacity, set again", name)
	}
	return nil
}

// hasResources reports whether have holds each of want's resources in the same quantity.
func hasResources(have, want corev1.ResourceList) bool {
	for k, q := range want {
		if h, ok := have[k]; !ok || h.Cmp(q) != 0 {
			return false
		}
	}
	return true
}

// Stop stops the components, then the control plane, whatever fails first.
func (c *Cluster) Stop() error {
	if c == nil {
		return nil
	}
	var errs []error
	for i := len(c.components) - 1; i >= 0; i-- {
		errs = append(errs, c.components[i].stop())
	}
	c.components = nil
	errs = append(errs, c.ControlPlane.Stop())
	return errors.Join(errs...)
}
