package ensure

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/csaupgrade"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/opkit/opkit/outcome"
)

// Labels and annotations ensure writes on the children it creates or adopts.
const (
	// LabelOwnerUID holds the owner's UID. Every child carries it, whether or
	// not it also has an ownerReference, so pruning finds children with a
	// label selector on the cache and adoption checks can see a foreign owner
	// even where ownerReferences cannot express it (cluster-scoped and
	// cross-namespace children).
	LabelOwnerUID = "ensure.opkit.dev/owner-uid"
	// LabelManager holds the Ensurer's field owner (or "h-" and a hash of it
	// when it is not a valid label value), so two Ensurers sharing an owner
	// never prune each other's children.
	LabelManager = "ensure.opkit.dev/manager"
	// AnnotationOwner names the owner, as "Kind.group namespace/name"
	// ("Kind name" for a cluster-scoped owner in the core group), on the
	// children no ownerReference can link to it: children of a namespaced
	// owner in another namespace or cluster-scoped. It is there for humans,
	// error messages and the reconciler package's mapping of such a child
	// to its owner. Children with a controller ownerReference (those in the
	// owner's namespace, and all children of a cluster-scoped owner) do not
	// get it — the ownerReference names the owner, and an annotation on
	// each would make every child's annotations differ from its siblings'
	// (a map per child in every cache); children an earlier ensure gave it
	// keep it.
	AnnotationOwner = "ensure.opkit.dev/owner"
)

// Errors, matched with errors.Is. Every error ensure returns names the object
// (Kind and namespace/name). The errors below carry an outcome class and a
// reason (github.com/opkit/opkit/outcome), so a status condition shows the
// reason and a message written for whoever runs kubectl: one statement of the
// problem and what to do, without the sentinel's own text.
var (
	// ErrInvalid: the declaration cannot be written as given (no name, a
	// generateName, a namespace the Ensurer does not allow, a kind the scheme
	// does not know, a duplicate, a field the kind's schema does not have, or
	// a 422 Invalid answer from the API server). Terminal, reason
	// [ReasonInvalidChild]: retrying the same declaration cannot succeed.
	ErrInvalid = errors.New("invalid desired object")
	// ErrNotOwned: an object exists at the desired name and is linked to
	// another owner (or to none), and the adoption policy forbids taking it.
	// Not terminal: outcome.DependencyNotReady with reason [ReasonNotOwned],
	// checked again after [NotOwnedRecheck]. The fix — deleting or renaming
	// the existing object, or handing it over — happens outside the owner and
	// bumps no generation of it, so a terminal error would stall the owner
	// for good; the re-check reads only the cache, so waiting costs no request.
	ErrNotOwned = errors.New("object exists and is not owned by this owner")
	// ErrImmutable: the API server rejected the change because it touches an
	// immutable field, and [WithRecreateOnImmutable] is not set. Terminal,
	// reason [ReasonImmutableField].
	ErrImmutable = errors.New("declared change touches an immutable field")
)

// Condition reasons of ensure's errors (outcome.Classify returns them).
const (
	// ReasonNotOwned is [ErrNotOwned]'s reason.
	ReasonNotOwned = "NotOwned"
	// ReasonInvalidChild is [ErrInvalid]'s reason.
	ReasonInvalidChild = "InvalidChild"
	// ReasonImmutableField is [ErrImmutable]'s reason.
	ReasonImmutableField = "ImmutableField"
)

// NotOwnedRecheck is how long an owner blocked by [ErrNotOwned] waits before
// ensure looks at the existing object again.
const NotOwnedRecheck = 30 * time.Second

// childError is an error with a message of its own that still matches its
// sentinel (and cause) with errors.Is and errors.As.
type childError struct {
	msg  string
	errs []error
}

func (e *childError) Error() string   { return e.msg }
func (e *childError) Unwrap() []error { return e.errs }

func newChildError(msg string, sentinel, cause error) error {
	errs := []error{sentinel}
	if cause != nil {
		errs = append(errs, cause)
	}
	return &childError{msg: msg, errs: errs}
}

// invalid is a terminal ErrInvalid with message msg and an optional cause.
func invalid(cause error, format string, args ...any) error {
	return outcome.Terminal(ReasonInvalidChild, newChildError(fmt.Sprintf(format, args...), ErrInvalid, cause))
}

// recentTTL bounds how long an object this Ensurer created (or read past the
// cache after AlreadyExists) stands in for a cache
// that has not seen it yet. Informers deliver within milliseconds; a record
// this old means the object was deleted before the cache caught up.
const recentTTL = time.Minute

// Ensurer makes declared child objects exist as declared. It is safe for
// concurrent use by many reconcile workers; create one per controller (it
// remembers its recent creates) and reuse it.
type Ensurer struct {
	c              client.Client
	scheme         *runtime.Scheme
	apiReader      client.Reader
	fieldOwner     string
	managerLabel   string
	strategy       Strategy
	adopt          AdoptionPolicy
	recreate       bool
	pruneProtos    []client.Object
	prune          []schema.GroupVersionKind
	migrateFrom    map[string]bool
	observer       Observer
	now            func() time.Time
	crossNamespace bool
	ownerIndex     bool
	indexProtos    []client.Object
	indexed        map[schema.GroupVersionKind]bool
	policyProtos   []fieldPolicy
	policies       map[schema.GroupVersionKind][]fieldPolicy
	schemas        schemas
	records        recordCache
	verified       verified
	informers      cache.Informers
	watched        map[schema.GroupVersionKind]bool // kinds with a record-dropping handler
	scopes         sync.Map                         // schema.GroupVersionKind → namespaced (bool)
	ownerStores    sync.Map                         // schema.GroupVersionKind → *ownerStore, or nil
	pruneKinds     map[schema.GroupVersionKind]client.Object

	mu     sync.Mutex
	recent map[objectKey]record // live objects this Ensurer created or read past the cache
	// recentSwept is when expired records were last dropped from recent.
	recentSwept time.Time
	deleted     map[types.UID]time.Time
}

type objectKey struct {
	gvk       schema.GroupVersionKind
	namespace string
	name      string
}

type record struct {
	live map[string]any
	at   time.Time
}

// New returns an Ensurer writing through c as field manager fieldOwner. c is
// normally the manager's client: reads come from its cache, which is what
// makes a no-op reconcile free. Unstructured declarations are read from the
// cache only when c's cache options enable unstructured caching.
func New(c client.Client, fieldOwner string, opts ...Option) (*Ensurer, error) {
	if c == nil {
		return nil, errors.New("ensure: nil client")
	}
	if fieldOwner == "" {
		return nil, errors.New("ensure: empty field owner")
	}
	e := &Ensurer{
		c: c, scheme: c.Scheme(), apiReader: c, fieldOwner: fieldOwner,
		migrateFrom: map[string]bool{}, observer: nopObserver{}, now: time.Now,
		recent: map[objectKey]record{}, deleted: map[types.UID]time.Time{},
	}
	for _, o := range opts {
		o(e)
	}
	e.migrateFrom[fieldOwner] = true
	e.managerLabel = fieldOwner
	if len(validation.IsValidLabelValue(fieldOwner)) > 0 {
		sum := sha256.Sum256([]byte(fieldOwner))
		e.managerLabel = "h-" + hex.EncodeToString(sum[:])[:40]
	}
	e.pruneKinds = map[schema.GroupVersionKind]client.Object{}
	for _, p := range e.pruneProtos {
		gvk, err := apiutil.GVKForObject(p, e.scheme)
		if err != nil {
			return nil, fmt.Errorf("ensure: prune kind %T: %w", p, err)
		}
		e.prune = append(e.prune, gvk)
		e.pruneKinds[gvk] = p
	}
	e.indexed = map[schema.GroupVersionKind]bool{}
	for _, p := range e.indexProtos {
		gvk, err := apiutil.GVKForObject(p, e.scheme)
		if err != nil {
			return nil, fmt.Errorf("ensure: indexed kind %T: %w", p, err)
		}
		e.indexed[gvk] = true
	}
	if e.ownerIndex && len(e.indexProtos) == 0 {
		for _, gvk := range e.prune {
			e.indexed[gvk] = true
		}
	}
	e.policies = map[schema.GroupVersionKind][]fieldPolicy{}
	for _, fp := range e.policyProtos {
		gvk, err := apiutil.GVKForObject(fp.kind, e.scheme)
		if err != nil {
			return nil, fmt.Errorf("ensure: field policy kind %T: %w", fp.kind, err)
		}
		e.policies[gvk] = append(e.policies[gvk], fp)
	}
	return e, nil
}

// FieldOwner returns the field manager name the Ensurer writes with.
func (e *Ensurer) FieldOwner() string { return e.fieldOwner }

type ownerInfo struct {
	gvk        schema.GroupVersionKind
	uid        types.UID
	namespace  string
	name       string
	annotation string
	display    string // "Kind namespace/name", for messages
}

func (e *Ensurer) ownerOf(owner client.Object) (ownerInfo, error) {
	if owner == nil {
		return ownerInfo{}, invalid(nil, "nil owner")
	}
	gvk, err := apiutil.GVKForObject(owner, e.scheme)
	if err != nil {
		return ownerInfo{}, invalid(err, "owner %s: kind not known to the scheme: %v", owner.GetName(), err)
	}
	if owner.GetUID() == "" {
		return ownerInfo{}, invalid(nil, "owner %s %s/%s has no UID (read it from the API first)",
			gvk.Kind, owner.GetNamespace(), owner.GetName())
	}
	oi := ownerInfo{gvk: gvk, uid: owner.GetUID(), namespace: owner.GetNamespace(), name: owner.GetName()}
	kind := gvk.Kind
	if gvk.Group != "" {
		kind += "." + gvk.Group
	}
	if oi.namespace != "" {
		oi.annotation = kind + " " + oi.namespace + "/" + oi.name
		oi.display = gvk.Kind + " " + oi.namespace + "/" + oi.name
	} else {
		oi.annotation = kind + " " + oi.name
		oi.display = gvk.Kind + " " + oi.name
	}
	return oi, nil
}

// Ensure makes every desired object exist as declared, as a child of owner,
// then prunes (see [WithPrune]). A desired object declares the fields the
// operator manages; see the package documentation for what "declared" means
// and what is never touched. Objects are handled in order; the first error
// stops the call (later objects and pruning wait for the retry) and the
// ChangeSet holds what was done before it. desired objects are not modified.
func (e *Ensurer) Ensure(ctx context.Context, owner client.Object, desired ...client.Object) (ChangeSet, error) {
	return e.EnsureKeeping(ctx, owner, nil, desired...)
}

// EnsureKeeping is [Ensurer.Ensure] for a part of the owner's children: it
// ensures desired exactly as Ensure does, and prunes only children that are
// neither desired nor named by keep. keep identifies objects by kind,
// namespace (empty: the owner's, as for desired) and name only; nothing else
// of them is read, and they are neither written nor checked for ownership.
// A caller that applies its children a few at a time (a workflow applying only
// the children whose dependencies are ready) passes the others as keep, so
// children it is not writing now are left as they are instead of pruned.
func (e *Ensurer) EnsureKeeping(ctx context.Context, owner client.Object, keep []client.Object, desired ...client.Object) (ChangeSet, error) {
	oi, err := e.ownerOf(owner)
	if err != nil {
		return nil, err
	}
	cs := make(ChangeSet, 0, len(desired))
	kept := make(map[objectKey]bool, len(keep))
	for _, k := range keep {
		t, err := e.target(oi, k)
		if err != nil {
			return cs, err
		}
		kept[t.key] = true
	}
	want := make(map[objectKey]bool, len(desired)+len(kept))
	for _, d := range desired {
		t, err := e.target(oi, d)
		if err != nil {
			return cs, err
		}
		if want[t.key] {
			return cs, invalid(nil, "%s declared twice", t)
		}
		want[t.key] = true
		decl, err := declared(d)
		if err != nil {
			return cs, invalid(err, "%s: %v", t, err)
		}
		// The first declaration is decl itself (nothing else holds it once
		// its digest is taken); a rare second one (a create after a patch
		// found the object gone) is converted from d again.
		first := true
		t.declare = func(map[string]any) (map[string]any, error) {
			if first {
				first = false
				return decl, nil
			}
			return declared(d)
		}
		t.record = true
		digest := declDigest(decl, oi, t.ownerRef)
		t.digest = &digest
		t.proto = e.emptyLike(d, t.key.gvk)
		_, isUnstructured := t.proto.(runtime.Unstructured)
		t.scratch = !isUnstructured
		ch, out, err := e.ensure(ctx, oi, t, e.strategy)
		if out != nil && (ch.Action == Created || ch.Action == Updated || ch.Action == Recreated) {
			ch.Object = &unstructured.Unstructured{Object: out}
		}
		if ch.Action != "" {
			cs = append(cs, ch)
			e.observer.ObserveChange(ctx, ch)
		}
		if err != nil {
			return cs, err
		}
	}
	for k := range kept {
		want[k] = true
	}
	pruned, err := e.pruneExcept(ctx, oi, want)
	for _, ch := range pruned {
		e.observer.ObserveChange(ctx, ch)
	}
	return append(cs, pruned...), err
}

// CreateOrPatch is controllerutil.CreateOrUpdate done right, for code written
// in that style: it reads obj (by its name and namespace) from the cache,
// calls mutate, and then creates obj, or sends a JSON merge patch of only the
// fields mutate set to a value that differs from the live object — no write
// at all when there is none. A field mutate leaves zero or unset (as happens
// when it assigns a whole desired spec, forgetting server defaults, an HPA's
// replicas, …) is not a change: it is left as it is. Lists mutate changed are
// replaced whole under an optimistic lock. obj holds the live object
// afterwards. mutate must not change the name or namespace, and must be
// idempotent: when a create meets AlreadyExists (a stale cache) it runs again
// on the live object. It always uses
// [MergePatch], whatever the Ensurer's strategy, never prunes, and keeps no
// record ([AnnotationDeclared]): the mutate function sees the whole live
// object, so what it "declares" is everything, and a field it stops setting is
// left as it is.
func (e *Ensurer) CreateOrPatch(ctx context.Context, owner, obj client.Object, mutate func() error) (Change, error) {
	oi, err := e.ownerOf(owner)
	if err != nil {
		return Change{}, err
	}
	t, err := e.target(oi, obj)
	if err != nil {
		return Change{}, err
	}
	obj.SetNamespace(t.key.namespace)
	t.proto = obj
	t.declare = func(live map[string]any) (map[string]any, error) {
		if live != nil {
			if err := e.fill(obj, live); err != nil {
				return nil, err
			}
		}
		if err := mutate(); err != nil {
			return nil, err
		}
		if obj.GetName() != t.key.name || obj.GetNamespace() != t.key.namespace {
			return nil, invalid(nil, "%s: mutate changed the name or namespace", t)
		}
		return declared(obj)
	}
	ch, live, err := e.ensure(ctx, oi, t, MergePatch)
	if live != nil {
		if ferr := e.fill(obj, live); ferr != nil && err == nil {
			err = ferr
		}
	}
	if ch.Action != "" {
		e.observer.ObserveChange(ctx, ch)
	}
	return ch, err
}

func (e *Ensurer) fill(obj client.Object, live map[string]any) error {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		u.Object = runtime.DeepCopyJSON(live)
		return nil
	}
	// Start from zero so fields the live object lacks do not linger.
	v := reflect.ValueOf(obj).Elem()
	v.Set(reflect.Zero(v.Type()))
	return runtime.DefaultUnstructuredConverter.FromUnstructured(runtime.DeepCopyJSON(live), obj)
}

// target is one object to ensure.
type target struct {
	key       objectKey
	ownerRef  bool // linked by a controller ownerReference as well as labels
	proto     client.Object
	declare   func(live map[string]any) (map[string]any, error)
	ownerInfo ownerInfo
	// record keeps AnnotationDeclared: what the declaration sets is the
	// whole truth, and what it stops setting is removed (Ensure, not
	// CreateOrPatch).
	record bool
	shape  shape
	// scratch says proto is a typed object of ensure's own, read only to
	// convert it (Ensure, not CreateOrPatch, whose proto is the caller's).
	scratch bool
	// digest is the declaration's (declDigest), for the memo of verified
	// children (Ensure, not CreateOrPatch).
	digest *[sha256.Size]byte
}

func (t *target) String() string {
	kind := t.key.gvk.Kind
	if t.key.gvk.Group != "" {
		kind += "." + t.key.gvk.Group
	}
	if t.key.namespace == "" {
		return kind + " " + t.key.name
	}
	return kind + " " + t.key.namespace + "/" + t.key.name
}

func (t *target) change(a Action) Change {
	return Change{GVK: t.key.gvk, Namespace: t.key.namespace, Name: t.key.name, Action: a}
}

// target validates d's identity and placement.
func (e *Ensurer) target(oi ownerInfo, d client.Object) (*target, error) {
	if d == nil {
		return nil, invalid(nil, "nil desired object")
	}
	gvk, err := apiutil.GVKForObject(d, e.scheme)
	if err != nil || gvk.Kind == "" || gvk.Version == "" {
		if err == nil {
			err = errors.New("no kind or version")
		}
		return nil, invalid(err, "%T %s/%s: kind not known to the scheme: %v", d, d.GetNamespace(), d.GetName(), err)
	}
	t := &target{key: objectKey{gvk: gvk, namespace: d.GetNamespace(), name: d.GetName()}, ownerInfo: oi}
	if t.key.name == "" {
		msg := "no name"
		if d.GetGenerateName() != "" {
			msg = "generateName is not supported (a child needs a stable name)"
		}
		return nil, invalid(nil, "%s: %s", t, msg)
	}
	namespaced, err := e.namespaced(d, gvk)
	if err != nil {
		if meta.IsNoMatchError(err) {
			// The CRD may not be installed yet; a retry can succeed.
			return nil, fmt.Errorf("%s: kind not served by the API server: %w", t, err)
		}
		return nil, fmt.Errorf("%s: %w", t, err)
	}
	switch {
	case !namespaced && t.key.namespace != "":
		return nil, invalid(nil, "%s: kind is cluster-scoped but a namespace is set", t)
	case namespaced && t.key.namespace == "":
		if oi.namespace == "" {
			return nil, invalid(nil, "%s: namespaced child of a cluster-scoped owner needs a namespace", t)
		}
		t.key.namespace = oi.namespace
	case namespaced && oi.namespace != "" && t.key.namespace != oi.namespace && !e.crossNamespace:
		return nil, invalid(nil, "%s: namespace differs from the owner's (%s) and this operator does not enable cross-namespace children",
			t, oi.namespace)
	}
	// ownerReferences work within a namespace and from a cluster-scoped owner.
	t.ownerRef = oi.namespace == "" || (namespaced && t.key.namespace == oi.namespace)
	return t, nil
}

// namespaced reports whether d's kind gvk is namespaced. The client's REST
// mapper is asked once per kind and the answer kept: a served kind's scope
// does not change (a CRD's spec.scope is immutable), and the mapper's own
// lookup was about a tenth of a no-op Ensure's CPU. A failed lookup (a kind not
// served yet) is not kept, so it is asked again next time.
func (e *Ensurer) namespaced(d client.Object, gvk schema.GroupVersionKind) (bool, error) {
	if v, ok := e.scopes.Load(gvk); ok {
		return v.(bool), nil
	}
	namespaced, err := e.c.IsObjectNamespaced(d)
	if err == nil {
		e.scopes.Store(gvk, namespaced)
	}
	return namespaced, err
}

func (e *Ensurer) emptyLike(d client.Object, gvk schema.GroupVersionKind) client.Object {
	if _, ok := d.(runtime.Unstructured); !ok {
		if o, err := e.scheme.New(gvk); err == nil {
			if co, ok := o.(client.Object); ok {
				return co
			}
		}
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

// link adds the owner link to a declaration.
func (e *Ensurer) link(t *target, decl map[string]any) map[string]any {
	decl["apiVersion"], decl["kind"] = t.key.gvk.GroupVersion().String(), t.key.gvk.Kind
	md, _ := decl["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		decl["metadata"] = md
	}
	md["name"] = t.key.name
	if t.key.namespace != "" {
		md["namespace"] = t.key.namespace
	} else {
		delete(md, "namespace")
	}
	labels, _ := md["labels"].(map[string]any)
	if labels == nil {
		labels = map[string]any{}
	}
	labels[LabelOwnerUID] = string(t.ownerInfo.uid)
	labels[LabelManager] = e.managerLabel
	md["labels"] = labels
	annotations, _ := md["annotations"].(map[string]any)
	if !t.ownerRef {
		// No ownerReference can name this owner: the annotation does.
		if annotations == nil {
			annotations = map[string]any{}
		}
		annotations[AnnotationOwner] = t.ownerInfo.annotation
	}
	if annotations != nil {
		delete(annotations, AnnotationDeclared) // ensure's own, set by declaration
		md["annotations"] = annotations
	}

	refs, _ := md["ownerReferences"].([]any)
	kept := refs[:0:0]
	for _, r := range refs {
		if m, ok := r.(map[string]any); ok && m["uid"] == string(t.ownerInfo.uid) {
			continue
		}
		kept = append(kept, r)
	}
	if t.ownerRef {
		kept = append(kept, map[string]any{
			"apiVersion":         t.ownerInfo.gvk.GroupVersion().String(),
			"kind":               t.ownerInfo.gvk.Kind,
			"name":               t.ownerInfo.name,
			"uid":                string(t.ownerInfo.uid),
			"controller":         true,
			"blockOwnerDeletion": true,
		})
	}
	if len(kept) > 0 {
		md["ownerReferences"] = kept
	} else {
		delete(md, "ownerReferences")
	}
	return decl
}

// declaration returns the object to write: the declaration, linked to the
// owner and, for Ensure, carrying its record (AnnotationDeclared); set is
// the recorded field set (nil without a record).
func (e *Ensurer) declaration(t *target, live map[string]any) (decl map[string]any, set *fieldpath.Set, err error) {
	decl, err = t.declare(live)
	if err != nil {
		return nil, nil, err
	}
	if live != nil {
		e.keepCreateOnly(t, decl, live)
	}
	decl = e.link(t, decl)
	if !t.record {
		return decl, nil, nil
	}
	set, rec, err := e.records.get(t.key.gvk, t.ownerInfo.uid, decl, t.shape, func() (*fieldpath.Set, string, error) {
		set := fieldSet(decl, t.shape).Difference(fieldSet(e.link(t, map[string]any{}), t.shape))
		rec, err := set.ToJSON()
		return set, string(rec), err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: record declared fields: %w", t, err)
	}
	md := decl["metadata"].(map[string]any)
	annotations, _ := md["annotations"].(map[string]any)
	if annotations == nil {
		annotations = map[string]any{}
		md["annotations"] = annotations
	}
	annotations[AnnotationDeclared] = rec
	return decl, set, nil
}

// ensure brings one object to its declaration and returns the live object
// as last seen.
func (e *Ensurer) ensure(ctx context.Context, oi ownerInfo, t *target, strategy Strategy) (Change, map[string]any, error) {
	sh, err := e.schemas.shapeOf(t.key.gvk)
	if err != nil {
		return Change{}, nil, fmt.Errorf("%s: schema of the kind: %w", t, err)
	}
	t.shape = sh
	live, unchanged, err := e.cached(ctx, t, strategy)
	if err == nil && !t.record {
		// CreateOrPatch's mutate sees the whole live object.
		live, err = e.trimmedLive(ctx, t, live)
	}
	if err != nil {
		return Change{}, nil, err
	}
	if unchanged {
		return t.change(Unchanged), nil, nil
	}
	fromCache := live != nil && t.proto.GetResourceVersion() != ""
	if live == nil {
		decl, _, err := e.declaration(t, nil)
		if err != nil {
			return Change{}, nil, err
		}
		created, existing, err := e.create(ctx, t, decl, strategy)
		if err != nil || created != nil {
			return t.change(Created), created, err
		}
		live = existing
	}
	u := &unstructured.Unstructured{Object: live}
	if u.GetDeletionTimestamp() != nil {
		return Change{}, live, fmt.Errorf("%s is being deleted; it is created again once it is gone", t)
	}
	adopted := false
	switch state, who := e.ownership(u, oi); state {
	case foreign:
		if e.adopt != AdoptAny {
			return Change{}, live, notOwned(t, oi, "it belongs to "+who)
		}
		if live, err = e.dropForeignController(ctx, t, u); err != nil {
			return Change{}, nil, err
		}
		adopted = true
	case orphan:
		if e.adopt == AdoptNever {
			return Change{}, live, notOwned(t, oi, "it has no owner")
		}
	}
	decl, set, err := e.declaration(t, live)
	if err != nil {
		return Change{}, live, err
	}
	if e.mustRecreate(t, decl, live) {
		out, err := e.recreateObject(ctx, t, decl, u.GetUID(), strategy)
		if err != nil {
			return Change{}, live, err
		}
		return t.change(Recreated), out, nil
	}
	var out map[string]any
	if strategy == ServerSideApply {
		out, err = e.apply(ctx, t, decl, set, live)
	} else {
		out, err = e.patch(ctx, t, decl, set, live)
	}
	switch {
	case err != nil && isImmutable(err) && e.recreate:
		out, err = e.recreateObject(ctx, t, decl, u.GetUID(), strategy)
		if err != nil {
			return Change{}, live, err
		}
		return t.change(Recreated), out, nil
	case err != nil && apierrors.IsNotFound(err):
		// Gone since it was read (a cache or this Ensurer's record of its
		// create that had not seen the delete): create it again now.
		e.forget(t.key)
		fresh, _, derr := e.declaration(t, nil)
		if derr != nil {
			return Change{}, nil, derr
		}
		created, existing, cerr := e.create(ctx, t, fresh, strategy)
		if cerr != nil || created != nil {
			return t.change(Created), created, cerr
		}
		return Change{}, existing, fmt.Errorf("%s was not found for a patch and then existed: %w", t, err)
	case err != nil:
		return Change{}, live, classify(t, err)
	case out == nil && adopted:
		return t.change(Updated), live, nil
	case out == nil:
		if fromCache && t.digest != nil {
			e.verified.set(t.key, t.proto.GetUID(), t.proto.GetResourceVersion(), *t.digest)
		}
		return t.change(Unchanged), live, nil
	}
	e.verified.forget(t.key)
	return t.change(Updated), out, nil
}

// cached reads the object from the client (the cache), falling back to this
// Ensurer's record of its own recent create while the cache lags behind it.
// The bool says the cached object is the one last found to hold t's
// declaration (the memo of verified children); no tree is returned then.
func (e *Ensurer) cached(ctx context.Context, t *target, strategy Strategy) (map[string]any, bool, error) {
	var opts []client.GetOption
	if t.scratch {
		// t.proto is ensure's own and typed: it is only converted to a new
		// tree below, never changed or kept, so a cache need not copy it.
		opts = append(opts, client.UnsafeDisableDeepCopy)
	}
	err := e.c.Get(ctx, client.ObjectKey{Namespace: t.key.namespace, Name: t.key.name}, t.proto, opts...)
	switch {
	case err == nil:
		e.mu.Lock()
		delete(e.recent, t.key)
		e.mu.Unlock()
		if t.digest != nil && e.verified.holds(t.key, t.proto.GetUID(), t.proto.GetResourceVersion(), *t.digest) {
			return nil, true, nil
		}
		if e.heldByCached(t, strategy) {
			e.verified.set(t.key, t.proto.GetUID(), t.proto.GetResourceVersion(), *t.digest)
			return nil, true, nil
		}
		live, err := liveTree(t.proto)
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", t, err)
		}
		// Typed objects from a cache may have an empty TypeMeta.
		live["apiVersion"], live["kind"] = t.key.gvk.GroupVersion().String(), t.key.gvk.Kind
		return live, false, nil
	case apierrors.IsNotFound(err):
		e.verified.forget(t.key)
		e.mu.Lock()
		defer e.mu.Unlock()
		if r, ok := e.recent[t.key]; ok {
			if e.now().Sub(r.at) < recentTTL {
				return r.live, false, nil
			}
			delete(e.recent, t.key)
		}
		return nil, false, nil
	default:
		return nil, false, fmt.Errorf("get %s: %w", t, err)
	}
}

// heldByCached reports that the cached typed object t.proto holds t's
// declaration as ensure would find it on the whole object: decided on only
// the part of the object the declaration names (toTreeWithin), without
// converting the rest. It answers only where that decision is the one the
// whole path below would take — Ensure (a record, a declaration that does
// not depend on the live object), no create-only or recreate-on-change
// fields for the kind (they copy or compare live values first),
// ownerReferences merged by UID, and with ServerSideApply a cached object
// without managedFields (apply reads them otherwise); it then requires what
// ensure would otherwise check on the whole object: not being deleted,
// linked to this owner (ownership: ours), and the declaration, link and
// record included, a subset of it (the first test of patch and of apply).
// Any other case, or false, falls through to the whole comparison, which
// decides as it always did; a declaration taken here is declared again
// there. In steady state (every child after a restart, every reconcile
// whose memo of verified children missed) it saves converting fields nobody
// declared: a Deployment's status, strategy and defaulted pod spec.
func (e *Ensurer) heldByCached(t *target, strategy Strategy) bool {
	if !t.record || !t.scratch || t.digest == nil || len(e.policies[t.key.gvk]) > 0 {
		return false
	}
	if kind, _ := t.shape.field("metadata").field("ownerReferences").list(); kind == atomicList {
		return false
	}
	decl, set, err := e.declaration(t, nil)
	if err != nil || set == nil {
		return false
	}
	md, _ := decl["metadata"].(map[string]any)
	// What ownership, the deletion check and apply read, whole.
	wmd := make(map[string]any, len(md)+6)
	maps.Copy(wmd, md)
	for _, k := range []string{"namespace", "labels", "annotations", "ownerReferences", "deletionTimestamp", "managedFields"} {
		if _, ok := wmd[k]; !ok {
			wmd[k] = nil
		}
	}
	want := make(map[string]any, len(decl))
	maps.Copy(want, decl)
	want["metadata"] = wmd
	live, ok := toTreeWithin(t.proto, want, t.shape)
	if !ok {
		return false
	}
	live["apiVersion"], live["kind"] = t.key.gvk.GroupVersion().String(), t.key.gvk.Kind
	u := &unstructured.Unstructured{Object: live}
	if u.GetDeletionTimestamp() != nil || strategy == ServerSideApply && len(u.GetManagedFields()) > 0 {
		return false
	}
	if state, _ := e.ownership(u, t.ownerInfo); state != ours {
		return false
	}
	return subset(decl, live, t.shape, keyedSubset)
}

// watchFor registers, once per kind and with [WithInformers], an event
// handler on the informer of t's kind that drops this Ensurer's record of an
// object as soon as the informer has stored it (add or update): from then on
// the cache answers for the object, so a NotFound from it means the object
// was deleted, and the next Ensure creates it again. Unstructured kinds are
// left alone (ensure starts no informer for them).
func (e *Ensurer) watchFor(ctx context.Context, t *target) {
	if e.informers == nil {
		return
	}
	if _, ok := t.proto.(runtime.Unstructured); ok {
		return
	}
	e.mu.Lock()
	if e.watched == nil {
		e.watched = map[schema.GroupVersionKind]bool{}
	}
	done := e.watched[t.key.gvk]
	e.watched[t.key.gvk] = true
	e.mu.Unlock()
	if done {
		return
	}
	inf, err := e.informers.GetInformer(ctx, t.proto, cache.BlockUntilSynced(false))
	if err == nil {
		drop := func(obj any) {
			if o, ok := obj.(client.Object); ok {
				e.dropSeen(objectKey{gvk: t.key.gvk, namespace: o.GetNamespace(), name: o.GetName()}, o.GetUID())
			}
		}
		_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { drop(obj) },
			UpdateFunc: func(_, obj any) { drop(obj) },
		})
	}
	if err != nil {
		e.mu.Lock()
		delete(e.watched, t.key.gvk)
		e.mu.Unlock()
	}
}

// dropSeen drops the record at key when it is of the object with uid.
func (e *Ensurer) dropSeen(key objectKey, uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if r, ok := e.recent[key]; ok {
		if u, _, _ := unstructured.NestedString(r.live, "metadata", "uid"); u == string(uid) {
			delete(e.recent, key)
		}
	}
}

// forget drops the record of the object at key.
func (e *Ensurer) forget(key objectKey) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.recent, key)
}

func (e *Ensurer) remember(ctx context.Context, t *target, live map[string]any) {
	e.mu.Lock()
	now := e.now()
	// Expired records are swept at most every quarter TTL (a sweep visits
	// every record); an expired record is ignored by cached meanwhile.
	if now.Sub(e.recentSwept) >= recentTTL/4 {
		for k, r := range e.recent {
			if now.Sub(r.at) >= recentTTL {
				delete(e.recent, k)
			}
		}
		e.recentSwept = now
	}
	e.recent[t.key] = record{live: live, at: now}
	e.mu.Unlock()
	if e.informers == nil {
		return
	}
	// Record first, then the handler and a look at the cache: an informer
	// that stored the object before the record existed is seen by the look,
	// one that stores it later calls the handler.
	e.watchFor(ctx, t)
	if _, ok := t.proto.(runtime.Unstructured); ok {
		return
	}
	probe, ok := t.proto.DeepCopyObject().(client.Object)
	if !ok {
		return
	}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: t.key.namespace, Name: t.key.name}, probe); err == nil {
		e.dropSeen(t.key, probe.GetUID())
	}
}

func (t *target) unstructured(obj map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: obj}
	u.SetGroupVersionKind(t.key.gvk)
	return u
}

// readLive gets the object from the API server, bypassing the cache.
func (e *Ensurer) readLive(ctx context.Context, t *target) (map[string]any, error) {
	u := t.unstructured(map[string]any{})
	if err := e.apiReader.Get(ctx, client.ObjectKey{Namespace: t.key.namespace, Name: t.key.name}, u); err != nil {
		return nil, err
	}
	return u.Object, nil
}

// create creates the object. When it turns out to exist already (a cache that
// has not caught up, or a create by someone else), it returns the live object
// instead, read once past the cache, for the caller to treat as "exists".
func (e *Ensurer) create(ctx context.Context, t *target, decl map[string]any, strategy Strategy) (created, existing map[string]any, err error) {
	if strategy == ServerSideApply {
		// An apply creates or updates, so it cannot tell "absent" from "not yet
		// cached"; one read past the cache keeps the owner check honest.
		live, err := e.readLive(ctx, t)
		switch {
		case err == nil:
			e.remember(ctx, t, live)
			return nil, live, nil
		case !apierrors.IsNotFound(err):
			return nil, nil, fmt.Errorf("get %s: %w", t, err)
		}
		u := t.unstructured(runtime.DeepCopyJSON(decl))
		// No force: should the object appear meanwhile with another owner's
		// link, the apply conflicts instead of taking it over.
		err = e.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(e.fieldOwner))
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || isSecondController(err) {
			return e.existing(ctx, t, err)
		}
		if err != nil {
			return nil, nil, classify(t, err)
		}
		e.remember(ctx, t, u.Object)
		return u.Object, nil, nil
	}
	var obj client.Object
	if typed := e.typedWrite(t); typed != nil && runtime.DefaultUnstructuredConverter.FromUnstructured(decl, typed) == nil {
		obj = typed
	} else {
		// decl is this call's own (no caller reads it afterwards): it is
		// sent as it is, and the response replaces it.
		obj = t.unstructured(decl)
	}
	err = e.c.Create(ctx, obj, client.FieldOwner(e.fieldOwner))
	if apierrors.IsAlreadyExists(err) {
		return e.existing(ctx, t, err)
	}
	if err != nil {
		return nil, nil, classify(t, err)
	}
	out, err := writtenTree(t, obj)
	if err != nil {
		return nil, nil, err
	}
	e.remember(ctx, t, out)
	return out, nil, nil
}

// typedWrite returns a new typed object of t's kind for a create or merge
// patch of a typed declaration (Ensure's, not CreateOrPatch's) of a
// built-in kind, or nil. The client decodes the API server's answer into
// it in protobuf, which controller-runtime asks built-in kinds' typed
// requests for: several times faster, and a fraction of the garbage, of
// the JSON an unstructured object is decoded from (a created Deployment:
// about a quarter of a millisecond). Only typed declarations: one of an
// unstructured declaration may hold fields the compiled types lack.
func (e *Ensurer) typedWrite(t *target) client.Object {
	if !t.scratch || !clientgoscheme.Scheme.Recognizes(t.key.gvk) {
		return nil
	}
	o, err := e.scheme.New(t.key.gvk)
	if err != nil {
		return nil
	}
	obj, ok := o.(client.Object)
	if !ok {
		return nil
	}
	return obj
}

// writtenTree returns the tree of obj, the object a merge-patch create or
// patch was answered with, without its managedFields (which nothing reads
// of it, and whose conversion to a tree is a third of a typed object's):
// an unstructured one's own map, a typed one's toTree (with its apiVersion
// and kind, which a typed decode leaves empty).
func writtenTree(t *target, obj client.Object) (map[string]any, error) {
	obj.SetManagedFields(nil)
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u.Object, nil
	}
	out, err := toTree(obj)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t, err)
	}
	out["apiVersion"], out["kind"] = t.key.gvk.GroupVersion().String(), t.key.gvk.Kind
	return out, nil
}

func (e *Ensurer) existing(ctx context.Context, t *target, cause error) (created, existing map[string]any, err error) {
	live, err := e.readLive(ctx, t)
	if err != nil {
		// Not visible to the reader either (deleted meanwhile, or the reader
		// is a cache): retry later, not in a loop.
		return nil, nil, fmt.Errorf("%s exists (%w) but cannot be read: %w", t, cause, err)
	}
	e.remember(ctx, t, live)
	return nil, live, nil
}

type ownershipState int

const (
	ours ownershipState = iota
	orphan
	foreign
)

// ownership classifies the live object's owner link against oi.
func (e *Ensurer) ownership(u *unstructured.Unstructured, oi ownerInfo) (ownershipState, string) {
	for _, r := range u.GetOwnerReferences() {
		if r.Controller != nil && *r.Controller {
			if r.UID == oi.uid {
				return ours, ""
			}
			if ns := u.GetNamespace(); ns != "" {
				return foreign, r.Kind + " " + ns + "/" + r.Name
			}
			return foreign, r.Kind + " " + r.Name
		}
	}
	switch uid := u.GetLabels()[LabelOwnerUID]; uid {
	case "":
		return orphan, ""
	case string(oi.uid):
		return ours, ""
	default:
		who := u.GetAnnotations()[AnnotationOwner]
		if who == "" {
			who = "another owner (uid " + uid + ")"
		}
		return foreign, who
	}
}

// notOwned is ErrNotOwned for t, told to the person who will fix it: what
// is in the way, and the ways out that need no change to the operator.
func notOwned(t *target, oi ownerInfo, why string) error {
	kind := t.key.gvk.Kind
	resource := strings.ToLower(kind)
	if t.key.gvk.Group != "" {
		resource += "." + t.key.gvk.Group
	}
	msg := fmt.Sprintf("%s already exists and is not managed by %s (%s). Delete or rename that %s, or change %s so it asks for another name",
		t, oi.display, why, kind, oi.display)
	if why == "it has no owner" {
		ns := ""
		if t.key.namespace != "" {
			ns = " -n " + t.key.namespace
		}
		msg += fmt.Sprintf(", or hand the %s over with: kubectl label %s %s%s %s=%s", kind, resource, t.key.name, ns, LabelOwnerUID, oi.uid)
	}
	msg += fmt.Sprintf(". Checked again every %s.", NotOwnedRecheck)
	return newChildError(msg, outcome.DependencyNotReady(ReasonNotOwned, msg, NotOwnedRecheck), ErrNotOwned)
}

// dropForeignController removes other controllers' ownerReferences (AdoptAny),
// under an optimistic lock so a concurrent owner change is not overwritten.
func (e *Ensurer) dropForeignController(ctx context.Context, t *target, u *unstructured.Unstructured) (map[string]any, error) {
	var refs []metav1.OwnerReference
	for _, r := range u.GetOwnerReferences() {
		if r.Controller == nil || !*r.Controller {
			refs = append(refs, r)
		}
	}
	if refs == nil {
		refs = []metav1.OwnerReference{}
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": u.GetResourceVersion(), "ownerReferences": refs}})
	if err != nil {
		return nil, err
	}
	out := t.unstructured(map[string]any{"metadata": map[string]any{"name": t.key.name, "namespace": t.key.namespace}})
	if err := e.c.Patch(ctx, out, client.RawPatch(types.MergePatchType, body), client.FieldOwner(e.fieldOwner)); err != nil {
		return nil, classify(t, err)
	}
	return out.Object, nil
}

// patch sends the merge patch that makes live hold decl, or nothing. With a
// record (set), fields the previous write declared and decl does not are
// removed, items of keyed lists only others declared are kept; without one
// (CreateOrPatch), only declared fields are written and lists are replaced
// by the declared ones.
func (e *Ensurer) patch(ctx context.Context, t *target, decl map[string]any, set *fieldpath.Set, live map[string]any) (map[string]any, error) {
	if kind, _ := t.shape.field("metadata").field("ownerReferences").list(); kind == atomicList {
		// A schema that does not know metadata (a custom resource read
		// without its OpenAPI) must not make the patch drop others' refs.
		keepOthersOwnerRefs(decl, live)
	}
	var p map[string]any
	var replacedList bool
	if set != nil {
		if subset(decl, live, t.shape, keyedSubset) {
			return nil, nil
		}
		var err error
		if live, err = e.trimmedLive(ctx, t, live); err != nil {
			return nil, err
		}
		rm := &fieldpath.Set{}
		if old := recordOf(live); old != nil {
			rm = old.Difference(set)
		}
		want, _ := merged(live, decl, rm, t.shape).(map[string]any)
		p, replacedList = recordedPatch(live, want)
		if len(p) == 0 {
			return nil, nil
		}
	} else {
		keepOthersOwnerRefs(decl, live)
		if subset(decl, live, t.shape, exactLists) {
			return nil, nil
		}
		p, replacedList = mergePatch(decl, live, t.shape)
	}
	if replacedList {
		md, _ := p["metadata"].(map[string]any)
		if md == nil {
			md = map[string]any{}
			p["metadata"] = md
		}
		md["resourceVersion"] = (&unstructured.Unstructured{Object: live}).GetResourceVersion()
	}
	body, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	out := e.typedWrite(t)
	if out == nil {
		out = t.unstructured(map[string]any{})
	}
	out.SetName(t.key.name)
	out.SetNamespace(t.key.namespace)
	if err := e.c.Patch(ctx, out, client.RawPatch(types.MergePatchType, body), client.FieldOwner(e.fieldOwner)); err != nil {
		return nil, err
	}
	return writtenTree(t, out)
}

// apply server-side applies decl unless live already holds it (its record
// included, so a field dropped from the declaration is a change) and this
// field owner owns nothing decl leaves out. The server removes what the
// field owner applied before and no longer applies; fields it set through
// Update (MergePatch before a strategy switch) are first folded into its
// apply ownership, read past the cache when the cache strips managedFields.
func (e *Ensurer) apply(ctx context.Context, t *target, decl map[string]any, set *fieldpath.Set, live map[string]any) (map[string]any, error) {
	lu := &unstructured.Unstructured{Object: live}
	entries := lu.GetManagedFields()
	legacy := legacyManagers(entries, e.migrateFrom)
	if legacy == nil && subset(decl, live, t.shape, keyedSubset) {
		owned, ok := ownedFields(entries, e.fieldOwner)
		if !ok || !ownsUndeclared(owned, decl) {
			return nil, nil
		}
	}
	if len(entries) == 0 && set != nil {
		if old := recordOf(live); old != nil && !old.Difference(set).Empty() {
			// Something is to be removed, and only managedFields tell
			// whether the apply alone will remove it.
			fresh, err := e.readLive(ctx, t)
			if err != nil {
				return nil, fmt.Errorf("%s: read managed fields: %w", t, err)
			}
			lu = &unstructured.Unstructured{Object: fresh}
			legacy = legacyManagers(lu.GetManagedFields(), e.migrateFrom)
		}
	}
	if legacy != nil {
		patch, err := csaupgrade.UpgradeManagedFieldsPatch(lu, sets.KeySet(legacy), e.fieldOwner)
		if err != nil {
			return nil, fmt.Errorf("%s: migrate managed fields: %w", t, err)
		}
		if patch != nil {
			out := t.unstructured(map[string]any{"metadata": map[string]any{"name": t.key.name, "namespace": t.key.namespace}})
			if err := e.c.Patch(ctx, out, client.RawPatch(types.JSONPatchType, patch)); err != nil {
				return nil, fmt.Errorf("%s: migrate managed fields: %w", t, err)
			}
		}
	}
	u := t.unstructured(runtime.DeepCopyJSON(decl))
	if err := e.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(e.fieldOwner), client.ForceOwnership); err != nil {
		return nil, err
	}
	return u.Object, nil
}

func (e *Ensurer) recreateObject(ctx context.Context, t *target, decl map[string]any, uid types.UID, strategy Strategy) (map[string]any, error) {
	u := t.unstructured(map[string]any{"metadata": map[string]any{"name": t.key.name, "namespace": t.key.namespace}})
	err := e.c.Delete(ctx, u, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("recreate %s: delete: %w", t, err)
	}
	created, existing, err := e.create(ctx, t, decl, strategy)
	if err != nil {
		return nil, fmt.Errorf("recreate %s: %w", t, err)
	}
	if existing != nil {
		// Finalizers keep the old object around; the next reconcile creates it.
		return nil, fmt.Errorf("recreate %s: the old object is still being deleted", t)
	}
	return created, nil
}

// isImmutable reports whether err is the API server refusing to change an
// immutable field. There is no dedicated reason, so this reads the field
// causes' messages, as kubectl replace --force users do.
func isImmutable(err error) bool {
	if !apierrors.IsInvalid(err) {
		return false
	}
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		return false
	}
	msgs := []string{se.Status().Message}
	if d := se.Status().Details; d != nil {
		for _, c := range d.Causes {
			msgs = append(msgs, c.Message)
		}
	}
	for _, m := range msgs {
		for _, s := range []string{"immutable", "may not change once set", "cannot be changed", "is not allowed to change"} {
			if containsFold(m, s) {
				return true
			}
		}
	}
	return false
}

// classify wraps a write error: 422 Invalid is terminal (the same write fails
// the same way), immutable-field changes are terminal ErrImmutable, anything
// else (conflicts, timeouts, throttling, forbidden) is returned for a retry.
func classify(t *target, err error) error {
	switch {
	case errors.Is(err, reconcile.TerminalError(nil)):
		return err
	case isImmutable(err):
		return outcome.Terminal(ReasonImmutableField, newChildError(
			fmt.Sprintf("%s cannot be changed as declared, because the change touches a field that cannot change once set (delete the %s to have it created again): %s",
				t, t.key.gvk.Kind, apiMessage(err)), ErrImmutable, err))
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		return invalid(err, "%s was rejected by the API server: %s", t, apiMessage(err))
	}
	return fmt.Errorf("%s: %w", t, err)
}

// apiMessage is the API server's own message for err.
func apiMessage(err error) string {
	var se apierrors.APIStatus
	if errors.As(err, &se) && se.Status().Message != "" {
		return se.Status().Message
	}
	return err.Error()
}

// isSecondController reports the API server refusing an object with two
// controller ownerReferences: ours, and one already on an object the cache
// did not show.
func isSecondController(err error) bool {
	return apierrors.IsInvalid(err) && containsFold(err.Error(), "Only one reference can have Controller set to true")
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

// keepOthersOwnerRefs puts the live object's other ownerReferences into decl:
// a merge patch replaces the list whole, and references other owners added
// (say, a non-controller owner) are not ours to drop.
func keepOthersOwnerRefs(decl, live map[string]any) {
	md, _ := decl["metadata"].(map[string]any)
	if md == nil {
		return
	}
	mine, _ := md["ownerReferences"].([]any)
	declared := map[any]bool{}
	for _, r := range mine {
		if m, ok := r.(map[string]any); ok {
			declared[m["uid"]] = true
		}
	}
	liveRefs, _, _ := unstructured.NestedSlice(live, "metadata", "ownerReferences")
	var merged []any
	for _, r := range liveRefs {
		if m, ok := r.(map[string]any); ok && !declared[m["uid"]] {
			merged = append(merged, m)
		}
	}
	if len(merged) == 0 {
		return
	}
	md["ownerReferences"] = append(merged, mine...)
}
