package apply

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ErrNoTarget is wrapped by TargetUnavailableError when the request has no target for a class.
var ErrNoTarget = errors.New("no target cluster given for this class")

// TargetUnavailableError means the cluster of a phase class is missing or cannot be reached.
type TargetUnavailableError struct {
	Class string
	// Target is the target's name, empty when there is no target.
	Target string
	Err    error
}

func (e *TargetUnavailableError) Error() string {
	if e.Target == "" {
		return fmt.Sprintf("cluster for phase class %q unavailable: %v", e.Class, e.Err)
	}
	return fmt.Sprintf("%s unavailable: %v", e.Target, e.Err)
}

func (e *TargetUnavailableError) Unwrap() error { return e.Err }

// ConfinementError says objects of a confined class would land outside the namespace the class is
// confined to (Request.Confine): cluster-scoped objects, or objects of another namespace.
type ConfinementError struct {
	// Namespace is the namespace the class is confined to.
	Namespace string
	Target    string
	// Objects describes each object outside it, for example "ClusterRoleBinding admin (cluster-scoped)".
	Objects []string
}

func (e *ConfinementError) Error() string {
	return fmt.Sprintf("objects for %s must be namespaced and in namespace %s, but the package holds %s",
		e.Target, e.Namespace, strings.Join(e.Objects, ", "))
}

// ConflictError is a server-side apply conflict: another field manager owns fields pkgsync wants
// to set to a different value. pkgsync does not take them over; the other manager must release
// them, or the package must stop setting them.
type ConflictError struct {
	Ref    ObjectRef
	Target string
	// Managers names the other field managers; Fields the conflicting field paths.
	Managers []string
	Fields   []string
	Err      error
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%s on %s: fields %s are owned by field manager %s; remove them from the package or from the other manager",
		e.Ref, e.Target, strings.Join(e.Fields, ", "), strings.Join(quoteAll(e.Managers), ", "))
}

func (e *ConflictError) Unwrap() error { return e.Err }

// CollisionError means an object exists that this owner does not own.
type CollisionError struct {
	Ref    ObjectRef
	Target string
	// OwnedBy describes the current owner, empty when the object carries no pkgsync labels.
	OwnedBy string
}

func (e *CollisionError) Error() string {
	if e.OwnedBy == "" {
		return fmt.Sprintf("%s on %s exists and is not managed by pkgsync; delete it or allow adoption", e.Ref, e.Target)
	}
	return fmt.Sprintf("%s on %s is owned by %s; remove it from one of the packages or allow adoption", e.Ref, e.Target, e.OwnedBy)
}

// ImmutableFieldError means the change touches a field the API server does not allow to change.
type ImmutableFieldError struct {
	Ref    ObjectRef
	Target string
	Err    error
}

func (e *ImmutableFieldError) Error() string {
	return fmt.Sprintf("%s on %s: an immutable field changed (%v); delete the object, or annotate it %s: \"true\" in the package to let pkgsync recreate it",
		e.Ref, e.Target, e.Err, RecreateAnnotation)
}

func (e *ImmutableFieldError) Unwrap() error { return e.Err }

// unreachable wraps errors that come from the network rather than the API server into a
// TargetUnavailableError; API errors are returned unchanged.
func unreachable(err error, class string, t Target) error {
	var urlErr *url.Error
	var netErr net.Error
	if errors.As(err, &urlErr) || errors.As(err, &netErr) || apierrors.IsServiceUnavailable(err) {
		return &TargetUnavailableError{Class: class, Target: t.Name, Err: err}
	}
	return err
}

// conflictFrom parses the field manager conflicts of a server-side apply response. The API server
// reports each conflict as a status cause `conflict with "MANAGER"[ using VERSION...]`, field PATH;
// no client library parses these, hence this function.
func conflictFrom(err error, ref ObjectRef, target string) (*ConflictError, bool) {
	if !apierrors.IsConflict(err) {
		return nil, false
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return nil, false
	}
	ce := &ConflictError{Ref: ref, Target: target, Err: err}
	seen := map[string]bool{}
	for _, c := range status.Status().Details.Causes {
		if c.Type != metav1.CauseTypeFieldManagerConflict {
			continue
		}
		ce.Fields = append(ce.Fields, c.Field)
		manager := strings.TrimPrefix(c.Message, "conflict with ")
		if q, err := strconv.QuotedPrefix(manager); err == nil {
			manager, _ = strconv.Unquote(q)
		}
		if !seen[manager] {
			seen[manager] = true
			ce.Managers = append(ce.Managers, manager)
		}
	}
	if len(ce.Fields) == 0 {
		return nil, false
	}
	return ce, true
}

// isImmutable reports whether the API server refused a change to an immutable field.
func isImmutable(err error) bool {
	if !apierrors.IsInvalid(err) {
		return false
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Details != nil {
		for _, c := range status.Status().Details.Causes {
			if strings.Contains(c.Message, "immutable") {
				return true
			}
		}
	}
	return strings.Contains(err.Error(), "immutable")
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}
