package nscache

import (
	"errors"
	"fmt"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// NotSelectedError is what [Cache.Get] and [Cache.List] return for a
// namespaced object in a namespace the cache does not serve: one the selector
// does not select, one that stopped matching (label removed, namespace
// deleted), or one whose Namespace object the cache has not seen.
//
// It is a NotFound: apierrors.IsNotFound(err) is true (it implements
// apierrors.APIStatus), so a reconciler that ignores NotFound treats objects
// outside the served namespaces as absent and ends quietly. It is not proof
// that the object was deleted: code that deletes external state when an
// object is not found should tell the two apart with [IsNotSelected].
type NotSelectedError struct {
	// Namespace is the namespace that was asked for ("" when a namespaced
	// object was asked for without one).
	Namespace string
	// Kind is the kind that was read.
	Kind schema.GroupKind
	// Name is the object's name; empty for a List.
	Name string
}

// Error says which read failed and why.
func (e *NotSelectedError) Error() string {
	what := e.Kind.String()
	if e.Name != "" {
		what += " " + e.Name
	}
	if e.Namespace == "" {
		return fmt.Sprintf("nscache: %s: a namespaced object needs a namespace", what)
	}
	return fmt.Sprintf("nscache: %s: namespace %q is not served by this cache (its labels do not match the namespace selector, or it was deleted)", what, e.Namespace)
}

// Status makes the error a NotFound for apierrors.IsNotFound and
// apierrors.ReasonForError.
func (e *NotSelectedError) Status() metav1.Status {
	return metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusNotFound,
		Reason:  metav1.StatusReasonNotFound,
		Message: e.Error(),
		Details: &metav1.StatusDetails{Name: e.Name, Group: e.Kind.Group, Kind: e.Kind.Kind},
	}
}

// IsNotSelected reports whether err (or an error it wraps) is a
// [NotSelectedError].
func IsNotSelected(err error) bool {
	var ns *NotSelectedError
	return errors.As(err, &ns)
}
