package webhook

import (
	"cmp"
	"context"
	"fmt"
	"reflect"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Immutable reports a Forbidden error at path when newV differs from oldV.
// Values are compared with apimachinery's semantic equality: quantities
// compare by value, and a nil slice or map equals an empty one (they encode
// the same way once omitempty applies).
func Immutable[V any](path *field.Path, oldV, newV V) field.ErrorList {
	if apiequality.Semantic.DeepEqual(oldV, newV) {
		return nil
	}
	return field.ErrorList{field.Forbidden(path, "field is immutable")}
}

// ImmutableOnceSet is [Immutable] for a field that may be set once: changing it
// from its zero value is allowed, any later change is Forbidden.
func ImmutableOnceSet[V any](path *field.Path, oldV, newV V) field.ErrorList {
	if reflect.ValueOf(&oldV).Elem().IsZero() {
		return nil
	}
	if apiequality.Semantic.DeepEqual(oldV, newV) {
		return nil
	}
	return field.ErrorList{field.Forbidden(path, "field is immutable once set")}
}

// OneOfMember is one alternative of a one-of group, see [Member].
type OneOfMember struct {
	// Name is the member's JSON field name, relative to the group's parent path.
	Name string
	// Set reports whether the member is set in the object.
	Set bool
}

// Member names a one-of alternative and whether it is set, for [ExactlyOneOf]
// and [AtMostOneOf].
func Member(name string, set bool) OneOfMember { return OneOfMember{Name: name, Set: set} }

// ExactlyOneOf requires exactly one member to be set. None set is Required at
// parent; every member set after the first is Forbidden at its own path, so
// the message points at the fields to remove.
func ExactlyOneOf(parent *field.Path, members ...OneOfMember) field.ErrorList {
	errs := AtMostOneOf(parent, members...)
	for _, m := range members {
		if m.Set {
			return errs
		}
	}
	return append(errs, field.Required(parent, "exactly one of "+memberNames(parent, members)+" must be set"))
}

// AtMostOneOf allows no member or one member to be set; every member set after
// the first is Forbidden at its own path.
func AtMostOneOf(parent *field.Path, members ...OneOfMember) field.ErrorList {
	var errs field.ErrorList
	first := ""
	for _, m := range members {
		if !m.Set {
			continue
		}
		if first == "" {
			first = m.Name
			continue
		}
		errs = append(errs, field.Forbidden(parent.Child(m.Name),
			fmt.Sprintf("may not be set together with %s: only one of %s may be set", parent.Child(first), memberNames(parent, members))))
	}
	return errs
}

func memberNames(parent *field.Path, members []OneOfMember) string {
	names := make([]string, len(members))
	for i, m := range members {
		names[i] = parent.Child(m.Name).String()
	}
	return strings.Join(names, ", ")
}

// InRange requires lo <= v <= hi and reports an Invalid error at path otherwise.
func InRange[N cmp.Ordered](path *field.Path, v, lo, hi N) field.ErrorList {
	if v < lo || v > hi {
		return field.ErrorList{field.Invalid(path, v, fmt.Sprintf("must be between %v and %v, inclusive", lo, hi))}
	}
	return nil
}

// ReferenceExists requires the object named by key to exist, reading it into
// into (whose type selects the kind). A missing object is a NotFound error at
// path naming the kind and key; any other read error is an InternalError at
// path (the request is denied, as the reference could not be checked).
//
// r should be a cache-backed reader (manager.GetClient()) in production, so
// admission does not add a live GET per request; note that a cache may lag a
// just-created referent by milliseconds.
func ReferenceExists(ctx context.Context, r client.Reader, path *field.Path, key client.ObjectKey, into client.Object) field.ErrorList {
	err := r.Get(ctx, key, into)
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		e := field.NotFound(path, key.Name)
		e.Detail = fmt.Sprintf("%s %s does not exist", kindOf(into), key)
		return field.ErrorList{e}
	default:
		return field.ErrorList{field.InternalError(path, fmt.Errorf("look up %s %s: %w", kindOf(into), key, err))}
	}
}

func kindOf(obj client.Object) string {
	if k := obj.GetObjectKind().GroupVersionKind().Kind; k != "" {
		return k
	}
	t := reflect.TypeOf(obj)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Name()
}
