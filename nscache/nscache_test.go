package nscache_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/opkit/opkit/nscache"
	"github.com/opkit/opkit/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m, &env)) }

// operatorUser creates a user who may only get/list/watch Namespaces
// cluster-wide (a ClusterRole) and work with ConfigMaps in each of
// namespaces (a Role and RoleBinding per namespace): what a namespace-scoped
// operator on nscache is granted. testenv.UserBoundTo binds one ClusterRole
// only, hence this local helper.
func operatorUser(t *testing.T, namespaces ...string) *rest.Config {
	t.Helper()
	ctx := context.Background()
	name := "nscache-operator-" + rand.String(6)
	var objs []client.Object
	objs = append(objs,
		&rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}}},
		},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}},
		})
	for _, ns := range namespaces {
		objs = append(objs,
			&rbacv1.Role{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"},
					Verbs: []string{"get", "list", "watch", "create", "update", "patch"}}},
			},
			&rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}},
			})
	}
	for _, o := range objs {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
	t.Cleanup(func() {
		for _, o := range objs {
			_ = env.Client.Delete(context.Background(), o)
		}
	})
	authn, err := env.Envtest.AddUser(envtest.User{Name: name}, &rest.Config{QPS: 100, Burst: 200})
	if err != nil {
		t.Fatal(err)
	}
	return authn.Config()
}

// perNamespace counts list and watch requests by namespace and resource
// (testenv.RequestCounter counts by verb and resource only) and how many
// watches are open right now, which drops when an informer stops.
type perNamespace struct {
	mu        sync.Mutex
	infos     *request.RequestInfoFactory
	counts    map[nsRequest]int
	open      map[nsRequest]int
	selectors map[string]int // label selectors of namespace list/watch requests
}

type nsRequest struct{ verb, resource, namespace string }

func (r nsRequest) String() string {
	ns := r.namespace
	if ns == "" {
		ns = "<cluster-wide>"
	}
	return fmt.Sprintf("%s %s in %s", r.verb, r.resource, ns)
}

func countPerNamespace(cfg *rest.Config) (*rest.Config, *perNamespace) {
	p := &perNamespace{
		infos:     &request.RequestInfoFactory{APIPrefixes: sets.NewString("api", "apis"), GrouplessAPIPrefixes: sets.NewString("api")},
		counts:    map[nsRequest]int{},
		open:      map[nsRequest]int{},
		selectors: map[string]int{},
	}
	out := rest.CopyConfig(cfg)
	prev := out.WrapTransport
	out.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if prev != nil {
			rt = prev(rt)
		}
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			info, err := p.infos.NewRequestInfo(req)
			if err != nil || !info.IsResourceRequest || (info.Verb != "list" && info.Verb != "watch") {
				return rt.RoundTrip(req)
			}
			key := nsRequest{info.Verb, info.Resource, info.Namespace}
			p.mu.Lock()
			p.counts[key]++
			if info.Resource == "namespaces" {
				p.selectors[req.URL.Query().Get("labelSelector")]++
			}
			p.mu.Unlock()
			resp, err := rt.RoundTrip(req)
			if err != nil || info.Verb != "watch" || resp.StatusCode != http.StatusOK {
				return resp, err
			}
			p.mu.Lock()
			p.open[key]++
			p.mu.Unlock()
			resp.Body = &onClose{ReadCloser: resp.Body, fn: func() {
				p.mu.Lock()
				p.open[key]--
				p.mu.Unlock()
			}}
			return resp, nil
		})
	}
	return out, p
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type onClose struct {
	io.ReadCloser
	once sync.Once
	fn   func()
}

func (c *onClose) Close() error {
	c.once.Do(c.fn)
	return c.ReadCloser.Close()
}

func (p *perNamespace) count(verb, resource, ns string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts[nsRequest{verb, resource, ns}]
}

func (p *perNamespace) openWatches(resource, ns string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.open[nsRequest{"watch", resource, ns}]
}

func (p *perNamespace) snapshot() map[nsRequest]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[nsRequest]int, len(p.counts))
	for k, v := range p.counts {
		out[k] = v
	}
	return out
}

func (p *perNamespace) String() string {
	var lines []string
	for k, v := range p.snapshot() {
		lines = append(lines, fmt.Sprintf("%s: %d", k, v))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// copier is the trivial controller: it copies ConfigMap "src"'s data into
// ConfigMap "copy" in the same namespace, and records which namespaces it
// reconciled.
type copier struct {
	client client.Client
	mu     sync.Mutex
	calls  map[string]int
}

func (r *copier) reconciles(ns string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[ns]
}

func (r *copier) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	r.mu.Lock()
	r.calls[req.Namespace]++
	r.mu.Unlock()
	var src corev1.ConfigMap
	if err := r.client.Get(ctx, req.NamespacedName, &src); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err) // a NotSelectedError is a NotFound too
	}
	dst := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: "copy"}}
	_, err := ctrl.CreateOrUpdate(ctx, r.client, dst, func() error {
		dst.Data = src.Data
		return nil
	})
	return reconcile.Result{}, err
}

func setLabel(t *testing.T, ns, key string, value *string) {
	t.Helper()
	var v any
	if value != nil {
		v = *value
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, key, mustJSON(v))
	obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if err := env.Client.Patch(context.Background(), obj, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatalf("label namespace %s: %v", ns, err)
	}
}

func mustJSON(v any) string {
	if v == nil {
		return "null"
	}
	return fmt.Sprintf("%q", v)
}

func writeSource(t *testing.T, ns, value string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "src"}}
	if _, err := ctrl.CreateOrUpdate(context.Background(), env.Client, cm, func() error {
		cm.Data = map[string]string{"v": value}
		return nil
	}); err != nil {
		t.Fatalf("write %s/src: %v", ns, err)
	}
}

// copied reports whether ns/copy holds value.
func copied(ns, value string) func() (bool, error) {
	return func() (bool, error) {
		var cm corev1.ConfigMap
		err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "copy"}, &cm)
		return err == nil && cm.Data["v"] == value, err
	}
}

func waitFor(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	testenv.WaitForEvery(t, 20*time.Millisecond, 60*time.Second, what, cond)
}

// TestFollowsNamespaceLabels runs a manager on nscache as a user with only
// namespace-scoped ConfigMap rights, and moves the label selector's set of
// namespaces under it: two labelled namespaces are served from the start, a
// third joins when labelled, one leaves when unlabelled, and a fourth, never
// labelled though the user may read it, is never touched.
func TestFollowsNamespaceLabels(t *testing.T) {
	leaks := append(testenv.LeakOptions(), goleak.IgnoreCurrent())
	ctx := context.Background()
	label := "nscache.opkit.dev/test-" + rand.String(6)
	on := ptr.To("on")
	a, b, c, d := env.Namespace(t), env.Namespace(t), env.Namespace(t), env.Namespace(t)
	userCfg := operatorUser(t, a, b, c, d)
	setLabel(t, a, label, on)
	setLabel(t, b, label, on)
	for _, ns := range []string{a, b, c, d} {
		writeSource(t, ns, "1")
	}

	cfg, requests := testenv.CountRequests(userCfg)
	cfg, byNS := countPerNamespace(cfg)
	mgr, err := ctrl.NewManager(cfg, manager.Options{
		Scheme:                 env.Scheme,
		NewCache:               nscache.New(labels.SelectorFromSet(labels.Set{label: "on"})),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	nsc, ok := mgr.GetCache().(*nscache.Cache)
	if !ok {
		t.Fatalf("manager cache is %T", mgr.GetCache())
	}
	// An index registered before any namespace is served must reach every
	// namespace that joins.
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.ConfigMap{}, "v", func(o client.Object) []string {
		if v, ok := o.(*corev1.ConfigMap).Data["v"]; ok {
			return []string{v}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	rec := &copier{client: mgr.GetClient(), calls: map[string]int{}}
	if err := builder.ControllerManagedBy(mgr).Named("copier").
		For(&corev1.ConfigMap{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == "src" }))).
		Complete(rec); err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Start(mctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-mgrDone; err != nil {
			t.Errorf("manager: %v", err)
		}
	}
	t.Cleanup(stop)

	// (1) The two labelled namespaces are served and reconciled.
	waitFor(t, "copies in the labelled namespaces", func() (bool, error) {
		okA, errA := copied(a, "1")()
		okB, errB := copied(b, "1")()
		return okA && okB, errors.Join(errA, errB)
	})
	if got, want := nsc.Namespaces(), sorted(a, b); !slices.Equal(got, want) {
		t.Fatalf("served namespaces = %v, want %v", got, want)
	}

	// (2) Labelling a third namespace while running: it joins, and the
	// handler added at start receives its existing ConfigMaps as adds.
	start := time.Now()
	setLabel(t, c, label, on)
	waitFor(t, "namespace "+c+" served", func() (bool, error) { return slices.Contains(nsc.Namespaces(), c), nil })
	joined := time.Since(start)
	waitFor(t, "copy in the newly labelled namespace", copied(c, "1"))
	reconciled := time.Since(start)
	t.Logf("newly labelled namespace: served after %s, its ConfigMap copied after %s", joined.Round(time.Millisecond), reconciled.Round(time.Millisecond))

	// Reads: the union over served namespaces, the index replayed on the
	// joined namespace, and a NotFound-like error for the others.
	var all corev1.ConfigMapList
	if err := mgr.GetCache().List(ctx, &all, client.MatchingFields{"v": "1"}); err != nil {
		t.Fatal(err)
	}
	if got, want := namespacesOf(all.Items), sorted(a, b, c); !slices.Equal(got, want) {
		t.Fatalf("List by index v=1 across namespaces: items in %v, want %v", got, want)
	}
	var cm corev1.ConfigMap
	err = mgr.GetCache().Get(ctx, client.ObjectKey{Namespace: d, Name: "src"}, &cm)
	if !nscache.IsNotSelected(err) || !apierrors.IsNotFound(err) {
		t.Fatalf("Get in an unselected namespace: %v, want a NotSelectedError that is a NotFound", err)
	}

	// (3) Unlabelling a namespace: it leaves, its watches close, and a change
	// there is not reconciled.
	if n := byNS.openWatches("configmaps", b); n == 0 {
		t.Fatalf("no open ConfigMap watch in %s while it is served", b)
	}
	setLabel(t, b, label, nil)
	waitFor(t, "namespace "+b+" no longer served", func() (bool, error) { return !slices.Contains(nsc.Namespaces(), b), nil })
	waitFor(t, "ConfigMap watches in "+b+" closed", func() (bool, error) {
		n := byNS.openWatches("configmaps", b)
		return n == 0, fmt.Errorf("%d open", n)
	})
	before := rec.reconciles(b)
	listsB, watchesB := byNS.count("list", "configmaps", b), byNS.count("watch", "configmaps", b)
	err = mgr.GetCache().Get(ctx, client.ObjectKey{Namespace: b, Name: "src"}, &cm)
	if !nscache.IsNotSelected(err) {
		t.Fatalf("Get in the namespace that left: %v, want a NotSelectedError", err)
	}
	writeSource(t, b, "2")
	writeSource(t, a, "2") // a barrier: once a's change is copied, b's would have been seen
	waitFor(t, "copy of the change in a served namespace", copied(a, "2"))
	if ok, err := copied(b, "1")(); !ok {
		t.Fatalf("%s/copy changed after the namespace left (err %v)", b, err)
	}
	if after := rec.reconciles(b); after != before {
		t.Fatalf("namespace %s reconciled %d times after it left", b, after-before)
	}

	stop()
	goleak.VerifyNone(t, leaks...)

	// (4) Requests: ConfigMaps were only ever listed and watched per
	// namespace, never cluster-wide, and never in the unlabelled namespace;
	// Namespaces were listed and watched cluster-wide with the selector only.
	t.Logf("requests by verb and resource:\n%s", requests)
	t.Logf("list/watch requests by namespace:\n%s", byNS)
	for k := range byNS.snapshot() {
		if k.resource == "configmaps" && k.namespace == "" {
			t.Errorf("%s: ConfigMaps were read cluster-wide", k)
		}
		if k.resource != "configmaps" && k.resource != "namespaces" {
			t.Errorf("%s: unexpected list/watch", k)
		}
	}
	for _, ns := range []string{a, b, c} {
		// Kubernetes 1.37 informers stream the initial list over the watch
		// (WatchList), so a served namespace may show a watch and no list.
		if byNS.count("watch", "configmaps", ns) == 0 {
			t.Errorf("ConfigMaps in served namespace %s: %d lists, %d watches; want a watch",
				ns, byNS.count("list", "configmaps", ns), byNS.count("watch", "configmaps", ns))
		}
	}
	if n := byNS.count("list", "configmaps", d) + byNS.count("watch", "configmaps", d); n != 0 {
		t.Errorf("ConfigMaps in the never-labelled namespace %s: %d list/watch requests", d, n)
	}
	if l, w := byNS.count("list", "configmaps", b), byNS.count("watch", "configmaps", b); l != listsB || w != watchesB {
		t.Errorf("ConfigMaps in %s after it left: lists %d→%d, watches %d→%d", b, listsB, l, watchesB, w)
	}
	if got := requests.Count("list", "configmaps") + requests.Count("watch", "configmaps"); got == 0 {
		t.Errorf("the request counter saw no ConfigMap list/watch")
	}
	byNS.mu.Lock()
	for sel := range byNS.selectors {
		if sel != label+"=on" {
			t.Errorf("Namespaces listed/watched with labelSelector %q, want %q", sel, label+"=on")
		}
	}
	byNS.mu.Unlock()
}

func sorted(s ...string) []string { return slices.Sorted(slices.Values(s)) }

func namespacesOf(items []corev1.ConfigMap) []string {
	set := sets.New[string]()
	for i := range items {
		set.Insert(items[i].Namespace)
	}
	return sets.List(set)
}

// events records what an event handler received, as "add ns/name",
// "update ns/name" or "delete ns/name".
type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) handler() toolscache.ResourceEventHandler {
	rec := func(verb string, obj any) {
		o, ok := obj.(client.Object)
		if !ok {
			return
		}
		e.mu.Lock()
		e.got = append(e.got, verb+" "+o.GetNamespace()+"/"+o.GetName())
		e.mu.Unlock()
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { rec("add", o) },
		UpdateFunc: func(_, o any) { rec("update", o) },
		DeleteFunc: func(o any) { rec("delete", o) },
	}
}

func (e *events) has(ev string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Contains(e.got, ev)
}

// about returns the events about objects in namespace ns.
func (e *events) about(ns string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, ev := range e.got {
		if strings.Contains(ev, " "+ns+"/") {
			out = append(out, ev)
		}
	}
	return out
}

// TestInformerFollowsNamespaces drives the cache directly: a handler added
// before Start and before a namespace joins, a handler added later, handler
// and informer removal, reads routed by namespace and scope, and a namespace
// leaving.
func TestInformerFollowsNamespaces(t *testing.T) {
	leaks := append(testenv.LeakOptions(), goleak.IgnoreCurrent())
	ctx := context.Background()
	label := "nscache.opkit.dev/test-" + rand.String(6)
	on := ptr.To("on")
	a, b, other := env.Namespace(t), env.Namespace(t), env.Namespace(t)
	setLabel(t, a, label, on)
	for _, ns := range []string{a, b, other} {
		writeSource(t, ns, "1")
	}
	got, err := nscache.New(labels.SelectorFromSet(labels.Set{label: "on"}))(env.Config, cache.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	c := got.(*nscache.Cache)

	var cm corev1.ConfigMap
	var notStarted *cache.ErrCacheNotStarted
	if err := c.Get(ctx, client.ObjectKey{Namespace: a, Name: "src"}, &cm); !errors.As(err, &notStarted) {
		t.Fatalf("Get before Start: %v, want ErrCacheNotStarted", err)
	}
	inf, err := c.GetInformer(ctx, &corev1.ConfigMap{})
	if err != nil {
		t.Fatal(err)
	}
	early := &events{}
	earlyReg, err := inf.AddEventHandler(early.handler())
	if err != nil {
		t.Fatal(err)
	}

	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Start(cctx) }()
	var startErr error
	stop := sync.OnceFunc(func() {
		cancel()
		startErr = <-done
	})
	t.Cleanup(stop)
	sctx, scancel := context.WithTimeout(ctx, time.Minute)
	defer scancel()
	if !c.WaitForCacheSync(sctx) {
		t.Fatal("WaitForCacheSync returned false")
	}
	waitFor(t, "early handler synced", func() (bool, error) { return earlyReg.HasSynced(), nil })
	if !early.has("add "+a+"/src") || len(early.about(b)) != 0 || len(early.about(other)) != 0 {
		t.Fatalf("early handler after sync: %v; want an add of %s/src and nothing else", early.got, a)
	}
	if err := c.Start(ctx); err == nil {
		t.Fatal("a second Start succeeded")
	}

	// Reads are routed by scope and namespace.
	if err := c.Get(ctx, client.ObjectKey{Namespace: a, Name: "src"}, &cm); err != nil || cm.Data["v"] != "1" {
		t.Fatalf("Get %s/src: %v %v", a, err, cm.Data)
	}
	var list corev1.ConfigMapList
	err = c.List(ctx, &list, client.InNamespace(b))
	if !nscache.IsNotSelected(err) || !apierrors.IsNotFound(err) {
		t.Fatalf("List in an unselected namespace: %v", err)
	}
	var ns corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: a}, &ns); err != nil {
		t.Fatalf("Get the selected Namespace %s: %v", a, err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: b}, &ns); !apierrors.IsNotFound(err) {
		t.Fatalf("Get the unselected Namespace %s: %v, want NotFound", b, err)
	}

	// A namespace joins: the handler added before it existed gets its objects.
	setLabel(t, b, label, on)
	waitFor(t, "early handler receives the joining namespace's object", func() (bool, error) {
		return early.has("add " + b + "/src"), nil
	})
	late := &events{}
	lateReg, err := inf.AddEventHandler(late.handler())
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "late handler synced", func() (bool, error) { return lateReg.HasSynced(), nil })
	if !late.has("add "+a+"/src") || !late.has("add "+b+"/src") || len(late.about(other)) != 0 {
		t.Fatalf("late handler after sync: %v", late.got)
	}
	if err := c.List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	if got, want := namespacesOf(list.Items), sorted(a, b); !slices.Equal(got, want) {
		t.Fatalf("List across namespaces: items in %v, want %v", got, want)
	}

	// A removed handler gets nothing more.
	if err := inf.RemoveEventHandler(lateReg); err != nil {
		t.Fatal(err)
	}
	if err := inf.RemoveEventHandler(lateReg); err != nil {
		t.Fatalf("RemoveEventHandler twice: %v", err)
	}
	writeSource(t, a, "2")
	waitFor(t, "early handler sees the update", func() (bool, error) { return early.has("update " + a + "/src"), nil })
	if late.has("update " + a + "/src") {
		t.Fatal("a removed handler received an update")
	}

	// A namespace leaves: no more events from it, reads fail.
	setLabel(t, a, label, nil)
	waitFor(t, "namespace "+a+" left", func() (bool, error) { return !slices.Contains(c.Namespaces(), a), nil })
	seen := len(early.about(a))
	writeSource(t, a, "3")
	writeSource(t, b, "3") // a barrier, as in TestFollowsNamespaceLabels
	waitFor(t, "early handler sees the update in "+b, func() (bool, error) { return early.has("update " + b + "/src"), nil })
	if evs := early.about(a); len(evs) != seen {
		t.Fatalf("events from %s after it left: %v", a, evs[seen:])
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: a, Name: "src"}, &cm); !nscache.IsNotSelected(err) {
		t.Fatalf("Get in the namespace that left: %v", err)
	}

	// RemoveInformer stops the informer everywhere.
	if err := c.RemoveInformer(ctx, &corev1.ConfigMap{}); err != nil {
		t.Fatal(err)
	}
	if !inf.IsStopped() {
		t.Fatal("informer not stopped after RemoveInformer")
	}
	if _, err := inf.AddEventHandler(late.handler()); err == nil {
		t.Fatal("AddEventHandler on a removed informer succeeded")
	}

	stop()
	if startErr != nil {
		t.Fatalf("Start: %v", startErr)
	}
	goleak.VerifyNone(t, leaks...)
}
