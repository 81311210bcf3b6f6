package notify

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// notifications counts notifications per endpoint and result: sent, failed (after its
// retries), dropped (the endpoint's queue was full) or deduplicated.
var notifications = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "pkgsync_notifications_total",
	Help: "Notifications per endpoint and result (sent, failed, dropped, deduplicated).",
}, []string{"endpoint", "result"})

func init() {
	crmetrics.Registry.MustRegister(notifications)
}
