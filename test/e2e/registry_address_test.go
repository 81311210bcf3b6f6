package e2e

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// A Package names its registry, and whoever writes Packages is not the operator: the controller
// process reaches no registry on a loopback address (its own metrics, health and pprof ports are
// there) unless the operator named it with --plain-http-registry or --local-registry. The
// suite's registry is on loopback: refused without the flag, Ready with it.
func TestControllerRefusesLoopbackRegistry(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	pushPackage(t, writePackage(t, configMapsPackage("", nil, "local")), "e2e/"+ns+"/local:v1")
	image := suite.registry.Host + "/e2e/" + ns + "/local:v1"
	// What a tenant aims at: a server on loopback, which counts what reaches it.
	var hits atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(target.Close)

	runControllerWithout(t, "loopback-refused")
	refused := newPackage(ns, "refused", image, "")
	refused.Labels = map[string]string{shardLabel: "loopback-refused"}
	createPackage(t, refused)
	cond := waitForReadyMessage(t, refused, metav1.ConditionFalse, v1alpha1.PullFailedReason, "--local-registry")
	assert.Contains(t, cond.Message, "--plain-http-registry")
	assert.Contains(t, cond.Message, "127.0.0.1 is a loopback address")

	aimed := newPackage(ns, "aimed", strings.TrimPrefix(target.URL, "http://")+"/metrics:v1", "")
	aimed.Labels = refused.Labels
	createPackage(t, aimed)
	waitForReadyMessage(t, aimed, metav1.ConditionFalse, v1alpha1.PullFailedReason, "--local-registry")
	assert.Zero(t, hits.Load(), "nothing reached the loopback server")

	runController(t, "loopback-allowed") // --plain-http-registry names the suite's registry
	allowed := newPackage(ns, "allowed", image, "")
	allowed.Labels = map[string]string{shardLabel: "loopback-allowed"}
	createPackage(t, allowed)
	waitForReady(t, allowed, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
}
