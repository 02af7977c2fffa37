package ensure

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Action is what ensure did to one object.
type Action string

const (
	// Created means the object did not exist and was created.
	Created Action = "Created"
	// Updated means the object existed and at least one field the operator manages
	// (or its owner link) was changed with one write.
	Updated Action = "Updated"
	// Unchanged means the object already held every declared field; no request was
	// sent for it.
	Unchanged Action = "Unchanged"
	// Deleted means the object carried this owner's link, was not desired any more
	// and was deleted (pruned).
	Deleted Action = "Deleted"
	// Recreated means a declared change touched an immutable field and
	// [WithRecreateOnImmutable] was set, so the object was deleted and created.
	Recreated Action = "Recreated"
)

// Change is one object's outcome.
type Change struct {
	GVK       schema.GroupVersionKind
	Namespace string // empty for cluster-scoped objects
	Name      string
	Action    Action
	// Object is the object as the API server returned it from this write
	// (Created, Updated, Recreated), without metadata.managedFields after a
	// [MergePatch] write (as caches commonly hold objects); nil for
	// Unchanged and Deleted. An
	// informer cache may not have seen the write yet when the caller reads
	// the child back (a status step judging a Deployment it just patched):
	// this copy describes the object as of the write — its new generation
	// with the status it had then. Not to be modified.
	Object *unstructured.Unstructured
}

// String is "Kind.group namespace/name Action" (no group for the core group,
// no namespace for cluster-scoped objects), for logs and events.
func (c Change) String() string {
	kind := c.GVK.Kind
	if c.GVK.Group != "" {
		kind += "." + c.GVK.Group
	}
	name := c.Name
	if c.Namespace != "" {
		name = c.Namespace + "/" + c.Name
	}
	return kind + " " + name + " " + string(c.Action)
}

// ChangeSet lists what one [Ensurer.Ensure] call did, desired objects first
// (in the order given), pruned objects last.
type ChangeSet []Change

// Count returns how many changes have action a.
func (s ChangeSet) Count(a Action) int {
	n := 0
	for _, c := range s {
		if c.Action == a {
			n++
		}
	}
	return n
}

// Changed reports whether anything was written (any action but Unchanged).
func (s ChangeSet) Changed() bool { return len(s) != s.Count(Unchanged) }

// Summary counts the actions, e.g. "created 1, updated 0, unchanged 2,
// deleted 0", for an event message or a log line.
func (s ChangeSet) Summary() string {
	out := fmt.Sprintf("created %d, updated %d, unchanged %d, deleted %d",
		s.Count(Created), s.Count(Updated), s.Count(Unchanged), s.Count(Deleted))
	if n := s.Count(Recreated); n > 0 {
		out += fmt.Sprintf(", recreated %d", n)
	}
	return out
}

// String lists every change, separated by "; ".
func (s ChangeSet) String() string {
	parts := make([]string, len(s))
	for i, c := range s {
		parts[i] = c.String()
	}
	return strings.Join(parts, "; ")
}

// Observer is told about every change as it happens, for metrics or events.
// It must be safe for concurrent use and should not block. The observability
// package implements it; the default does nothing.
type Observer interface {
	ObserveChange(ctx context.Context, c Change)
}

type nopObserver struct{}

func (nopObserver) ObserveChange(context.Context, Change) {}
