package notify

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Recorder records events with the recorder it wraps and hands each to the Notifier too: every
// kind's events reach the endpoints through the one recorder the controllers share, and no
// controller knows of notifications.
type Recorder struct {
	record.EventRecorder
	Notifier *Notifier
	Scheme   *runtime.Scheme
}

var _ record.EventRecorder = (*Recorder)(nil)

// Event records and notifies.
func (r *Recorder) Event(object runtime.Object, eventtype, reason, message string) {
	r.EventRecorder.Event(object, eventtype, reason, message)
	r.notify(object, eventtype, reason, message)
}

// Eventf records and notifies.
func (r *Recorder) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	r.EventRecorder.Eventf(object, eventtype, reason, messageFmt, args...)
	r.notify(object, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

// AnnotatedEventf records and notifies.
func (r *Recorder) AnnotatedEventf(object runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	r.EventRecorder.AnnotatedEventf(object, annotations, eventtype, reason, messageFmt, args...)
	r.notify(object, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

func (r *Recorder) notify(object runtime.Object, eventtype, reason, message string) {
	accessor, err := meta.Accessor(object)
	if err != nil {
		return
	}
	gvk, err := apiutil.GVKForObject(object, r.Scheme)
	if err != nil {
		return
	}
	r.Notifier.Notify(Notification{
		Object: corev1.ObjectReference{Kind: gvk.Kind, APIVersion: gvk.GroupVersion().String(),
			Namespace: accessor.GetNamespace(), Name: accessor.GetName(), UID: accessor.GetUID()},
		EventType: eventtype, Reason: reason, Message: message, Time: time.Now(),
	})
}
