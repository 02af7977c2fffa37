package workflow

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/opkit/opkit/outcome"
)

// Node is one child of a workflow.
type Node struct {
	// Name identifies the node in DependsOn, reports and conditions. It must
	// be unique in the workflow and usable in a condition type: letters,
	// digits, '-', '_' and '.', starting and ending with a letter or digit.
	Name string
	// Object is the child: its declaration (what the Applier writes) and its
	// identity (Go type or GroupVersionKind, namespace, name). An empty
	// namespace of a namespaced kind means the owner's. Required; when Build
	// is set, only its identity is used.
	Object client.Object
	// Build, when set, produces the declaration at the moment the node is
	// applied, from the live objects of its dependencies (all ready then),
	// e.g. to copy a Service's clusterIP into a Deployment's env. Its result
	// must have Object's kind, namespace and name, or the node fails.
	Build func(ctx context.Context, deps Deps) (client.Object, error)
	// DependsOn names the nodes that must be ready before this one is
	// applied.
	DependsOn []string
	// Ready decides whether the live object is ready. Nil means [Default].
	Ready ReadyFunc
	// Active, when set and false, makes the node inactive: it is not
	// applied, and an existing object controlled by the owner is deleted;
	// once gone, it satisfies its dependents. It is called once per
	// [Workflow.Reconcile]. Nil means always active.
	Active func() bool
}

// Deps holds the live objects (as read from the client's cache) of a node's
// direct dependencies, by node name; an inactive dependency is absent.
type Deps map[string]client.Object

// Applier writes children. The workflow calls Apply once per node to be
// applied, with that node's declaration as obj and the identities of every
// other node in keep, so an applier that prunes children it is not given
// (opkit's ensure) leaves the other nodes alone. changed reports whether obj
// was written (created or changed): a node written in this pass is not
// considered ready until its object is seen again. An error fails the node
// only; outcome's class of the error (Terminal or not) decides whether the
// workflow's summary is terminal.
type Applier interface {
	Apply(ctx context.Context, owner, obj client.Object, keep []client.Object) (changed bool, err error)
}

// ApplierFunc adapts a function to [Applier]. The composition layer passes
// ensure's Ensurer as
//
//	workflow.ApplierFunc(func(ctx context.Context, owner, obj client.Object, keep []client.Object) (bool, error) {
//		cs, err := ensurer.EnsureKeeping(ctx, owner, keep, obj)
//		return cs.Changed(), err
//	})
type ApplierFunc func(ctx context.Context, owner, obj client.Object, keep []client.Object) (changed bool, err error)

// Apply calls f.
func (f ApplierFunc) Apply(ctx context.Context, owner, obj client.Object, keep []client.Object) (bool, error) {
	return f(ctx, owner, obj, keep)
}

// Option configures [New].
type Option func(*Workflow)

// WithRecheck sets how long a workflow that is waiting for a node (not
// ready, or being deleted) asks to be looked at again, as the after of its
// outcome.DependencyNotReady summary (default outcome.DefaultDependencyWait).
// A watch on the children's kinds reconciles the owner sooner, on the event
// that makes the node ready; the recheck is the safety net.
func WithRecheck(d time.Duration) Option { return func(w *Workflow) { w.recheck = d } }

// WithOwnership replaces the test that a live child belongs to the owner
// before the workflow deletes it (an inactive node, a teardown). The default
// is a controller ownerReference to the owner's UID; a workflow whose
// children are linked by labels only (cluster-scoped or cross-namespace
// children) passes a test reading those labels.
func WithOwnership(owned func(owner, obj client.Object) bool) Option {
	return func(w *Workflow) { w.owned = owned }
}

// Workflow is a validated graph of child nodes with the client it reads
// (through its cache) and deletes with, and the Applier it writes with. It
// holds no state between calls: build it once per controller or per
// reconcile, as is convenient.
type Workflow struct {
	c       client.Client
	apply   Applier
	nodes   []Node // topological order, ties in declaration order
	index   map[string]int
	deps    [][]int // direct dependencies by position
	rdeps   [][]int // direct dependents by position
	recheck time.Duration
	owned   func(owner, obj client.Object) bool

	stuckAfter time.Duration
	clock      clock.PassiveClock
}

// Errors of [New], matched with errors.Is.
var (
	// ErrInvalidGraph: a node has no name or object, a name repeats, a
	// dependency names no node, or the dependencies form a cycle.
	ErrInvalidGraph = errors.New("workflow: invalid graph")
)

// New validates nodes and returns the workflow. c is normally the manager's
// client: reads come from its cache, which is what makes a steady state cost
// no request. apply may be nil for a workflow used only for [Workflow.Teardown].
func New(c client.Client, apply Applier, nodes []Node, opts ...Option) (*Workflow, error) {
	if c == nil {
		return nil, errors.New("workflow: nil client")
	}
	w := &Workflow{c: c, apply: apply, index: map[string]int{}, recheck: outcome.DefaultDependencyWait, owned: controlledBy,
		stuckAfter: DefaultStuckAfter, clock: clock.RealClock{}}
	for _, o := range opts {
		o(w)
	}
	byName := map[string]int{}
	for i, n := range nodes {
		switch {
		case n.Name == "" || !validName(n.Name):
			return nil, fmt.Errorf("%w: node %d: name %q is empty or not usable in a condition type", ErrInvalidGraph, i, n.Name)
		case n.Object == nil || reflect.ValueOf(n.Object).IsNil():
			return nil, fmt.Errorf("%w: node %q has no object", ErrInvalidGraph, n.Name)
		case n.Object.GetName() == "":
			return nil, fmt.Errorf("%w: node %q: object has no name", ErrInvalidGraph, n.Name)
		}
		if _, dup := byName[n.Name]; dup {
			return nil, fmt.Errorf("%w: node %q declared twice", ErrInvalidGraph, n.Name)
		}
		byName[n.Name] = i
	}
	for _, n := range nodes {
		for _, d := range n.DependsOn {
			if _, ok := byName[d]; !ok {
				return nil, fmt.Errorf("%w: node %q depends on %q, which is not a node", ErrInvalidGraph, n.Name, d)
			}
		}
	}
	// Kahn's algorithm, always taking the earliest declared node that is
	// free, so the order is stable and follows the declaration where it can.
	placed := make([]bool, len(nodes))
	for len(w.nodes) < len(nodes) {
		next := -1
		for i, n := range nodes {
			if placed[i] {
				continue
			}
			free := true
			for _, d := range n.DependsOn {
				if !placed[byName[d]] {
					free = false
					break
				}
			}
			if free {
				next = i
				break
			}
		}
		if next < 0 {
			var left []string
			for i, n := range nodes {
				if !placed[i] {
					left = append(left, n.Name)
				}
			}
			return nil, fmt.Errorf("%w: dependency cycle among %s", ErrInvalidGraph, strings.Join(left, ", "))
		}
		placed[next] = true
		w.index[nodes[next].Name] = len(w.nodes)
		w.nodes = append(w.nodes, nodes[next])
	}
	w.deps = make([][]int, len(w.nodes))
	w.rdeps = make([][]int, len(w.nodes))
	for i, n := range w.nodes {
		for _, d := range n.DependsOn {
			j := w.index[d]
			if !slices.Contains(w.deps[i], j) {
				w.deps[i] = append(w.deps[i], j)
				w.rdeps[j] = append(w.rdeps[j], i)
			}
		}
	}
	return w, nil
}

// Nodes returns the node names in the order the workflow evaluates them: a
// topological order of the graph, ties broken by declaration order.
func (w *Workflow) Nodes() []string {
	names := make([]string, len(w.nodes))
	for i, n := range w.nodes {
		names[i] = n.Name
	}
	return names
}

func validName(s string) bool {
	for i, r := range s {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !alnum && ((i == 0 || i == len(s)-1) || (r != '-' && r != '_' && r != '.')) {
			return false
		}
	}
	return len(s) <= 316
}

func controlledBy(owner, obj client.Object) bool {
	for _, r := range obj.GetOwnerReferences() {
		if r.Controller != nil && *r.Controller && r.UID == owner.GetUID() {
			return true
		}
	}
	return false
}

// identity is a node's object with its namespace resolved, and an empty
// object of the same type to read the live one into.
type identity struct {
	gvk       schema.GroupVersionKind
	namespace string
	name      string
}

func (id identity) String() string {
	if id.namespace == "" {
		return id.gvk.Kind + " " + id.name
	}
	return id.gvk.Kind + " " + id.namespace + "/" + id.name
}

func (w *Workflow) identify(owner client.Object, obj client.Object) (identity, error) {
	gvk, err := apiutil.GVKForObject(obj, w.c.Scheme())
	if err != nil {
		return identity{}, err
	}
	id := identity{gvk: gvk, namespace: obj.GetNamespace(), name: obj.GetName()}
	if id.namespace == "" {
		namespaced, err := w.c.IsObjectNamespaced(obj)
		if err != nil {
			return id, err
		}
		if namespaced {
			id.namespace = owner.GetNamespace()
		}
	}
	return id, nil
}

// empty returns a new object of obj's Go type (GVK set for unstructured).
func empty(obj client.Object, gvk schema.GroupVersionKind) client.Object {
	if _, ok := obj.(*unstructured.Unstructured); ok {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		return u
	}
	return reflect.New(reflect.TypeOf(obj).Elem()).Interface().(client.Object)
}

// read gets the live object from the client (the cache); nil when absent.
func (w *Workflow) read(ctx context.Context, n Node, id identity) (client.Object, error) {
	live := empty(n.Object, id.gvk)
	err := w.c.Get(ctx, client.ObjectKey{Namespace: id.namespace, Name: id.name}, live)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("workflow node %q: read %s: %w", n.Name, id, err)
	}
	return live, nil
}

// keepObject is the bare identity of a node, as passed to the Applier.
func keepObject(n Node, id identity) client.Object {
	k := empty(n.Object, id.gvk)
	k.SetNamespace(id.namespace)
	k.SetName(id.name)
	return k
}
