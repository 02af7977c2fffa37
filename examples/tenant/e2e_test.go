package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/ensure"
	"github.com/opkit/opkit/examples/internal/e2etest"
	"github.com/opkit/opkit/examples/internal/examplecmd"
	tenancyv1 "github.com/opkit/opkit/examples/tenant/api/v1alpha1"
	"github.com/opkit/opkit/examples/tenant/config"
	"github.com/opkit/opkit/examples/tenant/controller"
	"github.com/opkit/opkit/testenv"
)

// env runs in workloads mode: kube-controller-manager's namespace controller
// empties and removes deleted namespaces (the plain and garbage-collector
// modes leave them Terminating for ever), and its resource-quota controller
// computes the usage that quota admission needs.
var env *testenv.Env

func TestMain(m *testing.M) {
	// The operators' logs are not part of the tests' output (the demo test
	// sends its own to a file of its choice).
	logf.SetLogger(logr.Discard())
	scheme := e2etest.Must(newScheme())
	crds := e2etest.Must(config.CRDs())
	os.Exit(testenv.RunMain(withTenantAdmin{m}, &env, testenv.WithWorkloads(), testenv.WithCRDs(crds...), testenv.WithScheme(scheme)))
}

// withTenantAdmin installs the tenant-admin ClusterRole of config/rbac (what
// the operator binds) before the tests run.
type withTenantAdmin struct{ m *testing.M }

func (w withTenantAdmin) Run() int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := env.Client.Create(ctx, role(controller.DefaultAdminRole)); err != nil {
		fmt.Fprintln(os.Stderr, "install tenant-admin:", err)
		return 1
	}
	return w.m.Run()
}

// role returns the ClusterRole named name from config/rbac.
func role(name string) *rbacv1.ClusterRole {
	for _, o := range e2etest.Must(config.RBAC()) {
		if o.GetKind() == "ClusterRole" && o.GetName() == name {
			var r rbacv1.ClusterRole
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r); err != nil {
				panic(err)
			}
			return &r
		}
	}
	panic("no ClusterRole " + name + " in config/rbac")
}

// operator is one test's tenant operator.
type operator struct {
	// requests counts the operator's API requests.
	requests *testenv.RequestCounter
	// label selects the Tenants this operator serves: [operator.tenant] sets it.
	label map[string]string
	// cfg authenticates as the operator's user, bound to the generated role only.
	cfg *rest.Config
}

// startOperator runs the tenant operator until the test ends, as a user
// bound only to the ClusterRole generated from its RBAC markers (every test
// so shows that role sufficient), serving only the Tenants this test labels:
// other tests' Tenants stay out of its caches and counts.
func startOperator(t testing.TB, concurrency int) *operator {
	t.Helper()
	cfg, _ := e2etest.UserBoundTo(t, env, e2etest.Must(config.RBAC()), "manager-role")
	op := &operator{label: map[string]string{"e2e.tenancy.example.com/test": utilrand.String(8)}, cfg: cfg}
	mgr := e2etest.NewManager(t, cfg, env.Scheme, "", func(o *manager.Options) {
		o.Cache = controller.CacheOptions(labels.SelectorFromSet(op.label))
	})
	op.requests = mgr.Requests
	if err := controller.Setup(mgr, controller.Options{Observability: mgr.Observability, Concurrency: concurrency}); err != nil {
		t.Fatal(err)
	}
	mgr.Run(t)
	return op
}

// unique returns prefix with a random suffix: Tenants and namespaces are
// cluster-wide, and every test of the package shares one control plane.
func unique(prefix string) string { return prefix + "-" + utilrand.String(5) }

// tenant returns a Tenant this operator serves, with namespaces nss and admins.
func (op *operator) tenant(name string, admins tenancyv1.Admins, nss ...string) *tenancyv1.Tenant {
	t := &tenancyv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}, Spec: tenancyv1.TenantSpec{Admins: admins}}
	for k, v := range op.label {
		t.Labels[k] = v
	}
	for _, ns := range nss {
		t.Spec.Namespaces = append(t.Spec.Namespaces, tenancyv1.Namespace(ns))
	}
	return t
}

func create(ctx context.Context, t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
}

// waitFor polls until cond holds for tn, re-read each time.
func waitFor(ctx context.Context, t *testing.T, tn *tenancyv1.Tenant, what string, cond func(*tenancyv1.Tenant) bool) {
	t.Helper()
	e2etest.WaitFor(t, 90*time.Second, "Tenant "+tn.Name+": "+what, func() (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(tn), tn); err != nil {
			return false, err
		}
		return cond(tn), fmt.Errorf("conditions %+v, namespaces %+v", tn.Status.Conditions, tn.Status.Namespaces)
	})
}

func waitReady(ctx context.Context, t *testing.T, tn *tenancyv1.Tenant) {
	t.Helper()
	waitFor(ctx, t, tn, "Ready", ready)
	checkKstatus(t, tn, kstatus.CurrentStatus)
}

// checkKstatus checks that kstatus (what kubectl wait, Flux and Argo CD
// read) computes want for tn.
func checkKstatus(t *testing.T, tn *tenancyv1.Tenant, want kstatus.Status) {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tn)
	if err != nil {
		t.Fatal(err)
	}
	res, err := kstatus.Compute(&unstructured.Unstructured{Object: u})
	if err != nil || res.Status != want {
		t.Errorf("kstatus of Tenant %s = %v (%v), want %s", tn.Name, res, err, want)
	}
}

// waitStalled waits for Stalled=True with reason, and returns its message.
func waitStalled(ctx context.Context, t *testing.T, tn *tenancyv1.Tenant, reason string) string {
	t.Helper()
	waitFor(ctx, t, tn, "Stalled ("+reason+")", func(tn *tenancyv1.Tenant) bool {
		s := conditions.Get(tn, conditions.Stalled)
		return s != nil && s.Status == metav1.ConditionTrue && s.Reason == reason && s.ObservedGeneration == tn.Generation &&
			conditions.IsFalse(tn, conditions.Ready)
	})
	checkKstatus(t, tn, kstatus.FailedStatus)
	return conditions.Get(tn, conditions.Stalled).Message
}

// mutate re-reads tn, applies fn and updates it, retrying conflicts.
func mutate(ctx context.Context, t *testing.T, tn *tenancyv1.Tenant, fn func(*tenancyv1.Tenant)) {
	t.Helper()
	for {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(tn), tn); err != nil {
			t.Fatal(err)
		}
		fn(tn)
		err := env.Client.Update(ctx, tn)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
}

func gone(ctx context.Context, obj client.Object) (bool, error) {
	err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return false, err
}

// as returns a client that acts as user (in groups), through impersonation
// by the harness's administrator: what the API server allows that user is
// what it allows this client.
func as(t testing.TB, user string, groups ...string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func phases(tn *tenancyv1.Tenant) map[string]tenancyv1.NamespacePhase {
	out := map[string]tenancyv1.NamespacePhase{}
	for _, s := range tn.Status.Namespaces {
		out[s.Name] = s.Phase
	}
	return out
}

// checkNamespace checks that namespace ns holds exactly what the operator
// declares for tn, linked to tn, with adminRole bound to the admins.
func checkNamespace(ctx context.Context, t *testing.T, tn *tenancyv1.Tenant, ns, adminRole string) {
	t.Helper()
	owned := func(o client.Object) {
		t.Helper()
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			t.Fatalf("%T %s/%s: %v", o, o.GetNamespace(), o.GetName(), err)
		}
		ref := metav1.GetControllerOf(o)
		if ref == nil || ref.UID != tn.UID || o.GetLabels()[ensure.LabelOwnerUID] != string(tn.UID) {
			t.Errorf("%T %s/%s is not linked to Tenant %s: ownerReferences %v, labels %v", o, o.GetNamespace(), o.GetName(), tn.Name, o.GetOwnerReferences(), o.GetLabels())
		}
	}
	n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	owned(n)
	if n.Labels[controller.LabelTenant] != tn.Name || n.Labels[controller.LabelPodSecurity] != "baseline" {
		t.Errorf("namespace %s labels %v", ns, n.Labels)
	}
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: controller.QuotaName}}
	owned(q)
	want := tn.Spec.Quota
	if len(want) == 0 {
		want = controller.DefaultQuota
	}
	if len(q.Spec.Hard) != len(want) {
		t.Errorf("quota of %s: %v, want %v", ns, q.Spec.Hard, want)
	}
	for k, v := range want {
		if got := q.Spec.Hard[k]; got.Cmp(v) != 0 {
			t.Errorf("quota of %s: %s = %s, want %s", ns, k, got.String(), v.String())
		}
	}
	owned(&corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: controller.LimitRangeName}})
	deny := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: controller.DenyPolicyName}}
	owned(deny)
	if len(deny.Spec.PodSelector.MatchLabels)+len(deny.Spec.PodSelector.MatchExpressions) != 0 || len(deny.Spec.Ingress) != 0 {
		t.Errorf("default-deny policy of %s selects %v and allows %v", ns, deny.Spec.PodSelector, deny.Spec.Ingress)
	}
	allow := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: controller.AllowPolicyName}}
	owned(allow)
	if len(allow.Spec.Ingress) != 1 || len(allow.Spec.Ingress[0].From) != 1 || allow.Spec.Ingress[0].From[0].NamespaceSelector == nil ||
		allow.Spec.Ingress[0].From[0].NamespaceSelector.MatchLabels[controller.LabelTenant] != tn.Name {
		t.Errorf("allow-within-tenant policy of %s: %+v", ns, allow.Spec.Ingress)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: controller.AdminBindingName}}
	if len(controller.Subjects(tn)) == 0 {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(rb), rb); !apierrors.IsNotFound(err) {
			t.Errorf("RoleBinding %s/%s exists for a Tenant without admins: %v", ns, rb.Name, err)
		}
		return
	}
	owned(rb)
	if rb.RoleRef.Kind != "ClusterRole" || rb.RoleRef.Name != adminRole || !slices.Equal(rb.Subjects, controller.Subjects(tn)) {
		t.Errorf("RoleBinding %s/%s binds %v to %v, want ClusterRole %s to %v", ns, rb.Name, rb.RoleRef, rb.Subjects, adminRole, controller.Subjects(tn))
	}
}

// TestTenantOwnsItsNamespacesWithQuotaLimitsPoliciesAndAdmins: a Tenant
// becomes its namespaces, each with its quota, limits, network policies and
// admin binding, all linked to it; spec changes reach every namespace (a new
// quota, a new admin group, a new namespace), and the per-namespace status
// and Ready follow. The operator runs as a user bound to the generated role only.
func TestTenantOwnsItsNamespacesWithQuotaLimitsPoliciesAndAdmins(t *testing.T) {
	ctx := e2etest.Context(t, 3*time.Minute)
	op := startOperator(t, 2)
	name := unique("own")
	nss := []string{name + "-dev", name + "-prod"}
	tn := op.tenant(name, tenancyv1.Admins{Users: []string{"alice"}}, nss...)
	create(ctx, t, tn)
	waitReady(ctx, t, tn)
	for _, ns := range nss {
		checkNamespace(ctx, t, tn, ns, controller.DefaultAdminRole)
		if p := phases(tn)[ns]; p != tenancyv1.NamespaceReady {
			t.Errorf("status of %s: %s, want Ready", ns, p)
		}
	}

	added := name + "-qa"
	mutate(ctx, t, tn, func(tn *tenancyv1.Tenant) {
		tn.Spec.Quota = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("3"), corev1.ResourceRequestsCPU: resource.MustParse("1")}
		tn.Spec.Admins.Groups = []string{"platform-oncall"}
		tn.Spec.Namespaces = append(tn.Spec.Namespaces, tenancyv1.Namespace(added))
	})
	waitReady(ctx, t, tn)
	for _, ns := range append(nss, added) {
		checkNamespace(ctx, t, tn, ns, controller.DefaultAdminRole)
	}
	if len(tn.Status.Namespaces) != 3 || phases(tn)[added] != tenancyv1.NamespaceReady {
		t.Errorf("status namespaces %+v, want 3 Ready", tn.Status.Namespaces)
	}

	// No admins: no RoleBinding is left behind.
	mutate(ctx, t, tn, func(tn *tenancyv1.Tenant) { tn.Spec.Admins = tenancyv1.Admins{} })
	waitReady(ctx, t, tn)
	e2etest.WaitFor(t, 30*time.Second, "admin RoleBindings pruned", func() (bool, error) {
		for _, ns := range append(nss, added) {
			if ok, err := gone(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: controller.AdminBindingName}}); !ok {
				return false, err
			}
		}
		return true, nil
	})
}

// TestRemovedNamespaceIsKeptUntilTheDeletionGateOpens: a namespace removed
// from spec.namespaces is kept with everything in it (Retained, Stalled with
// NamespaceDeletionBlocked naming the annotation); listing it again makes the
// Tenant Ready; removed with the annotation, it is deleted with its contents,
// leaves the status, and the Tenant is Ready.
func TestRemovedNamespaceIsKeptUntilTheDeletionGateOpens(t *testing.T) {
	ctx := e2etest.Context(t, 3*time.Minute)
	op := startOperator(t, 2)
	name := unique("gate")
	keep, drop := name+"-keep", name+"-drop"
	tn := op.tenant(name, tenancyv1.Admins{Users: []string{"carol"}}, keep, drop)
	create(ctx, t, tn)
	waitReady(ctx, t, tn)
	data := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: drop, Name: "precious"}, Data: map[string]string{"k": "v"}}
	if err := as(t, "carol").Create(ctx, data); err != nil {
		t.Fatal(err)
	}

	remove := func(tn *tenancyv1.Tenant) { tn.Spec.Namespaces = []tenancyv1.Namespace{tenancyv1.Namespace(keep)} }
	mutate(ctx, t, tn, remove)
	msg := waitStalled(ctx, t, tn, controller.ReasonNamespaceDeletionBlocked)
	if !containsAll(msg, drop, tenancyv1.AllowNamespaceDeletionAnnotation) {
		t.Errorf("Stalled message does not name the namespace and the annotation: %q", msg)
	}
	if p := phases(tn); p[drop] != tenancyv1.NamespaceRetained || p[keep] != tenancyv1.NamespaceReady {
		t.Errorf("status namespaces %v, want %s Retained and %s Ready", p, drop, keep)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(data), data); err != nil {
		t.Fatalf("the retained namespace lost its data: %v", err)
	}
	checkNamespace(ctx, t, tn, drop, controller.DefaultAdminRole)

	// Listed again: nothing to delete, Ready.
	mutate(ctx, t, tn, func(tn *tenancyv1.Tenant) { tn.Spec.Namespaces = append(tn.Spec.Namespaces, tenancyv1.Namespace(drop)) })
	waitReady(ctx, t, tn)

	// Removed with the gate open: deleted, contents and all.
	mutate(ctx, t, tn, func(tn *tenancyv1.Tenant) {
		remove(tn)
		tn.Annotations = map[string]string{tenancyv1.AllowNamespaceDeletionAnnotation: "true"}
	})
	waitFor(ctx, t, tn, "Ready with only "+keep, func(tn *tenancyv1.Tenant) bool {
		return ready(tn) && len(tn.Status.Namespaces) == 1 && tn.Status.Namespaces[0].Name == keep
	})
	if ok, err := gone(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: drop}}); !ok {
		t.Fatalf("the Tenant is Ready while namespace %s still exists: %v", drop, err)
	}
	if ok, err := gone(ctx, data); !ok {
		t.Fatalf("ConfigMap %s/%s survived its namespace: %v", drop, data.Name, err)
	}
	checkNamespace(ctx, t, tn, keep, controller.DefaultAdminRole)
}

// TestDeletingTheTenantRemovesEverythingItCreated: deleting a Tenant deletes
// every namespace it owns — listed or retained — with what is in them, and
// the Tenant is gone only once they are: at the moment it disappears, none
// of its namespaces is left.
func TestDeletingTheTenantRemovesEverythingItCreated(t *testing.T) {
	ctx := e2etest.Context(t, 3*time.Minute)
	op := startOperator(t, 2)
	name := unique("del")
	nss := []string{name + "-a", name + "-b", name + "-retained"}
	tn := op.tenant(name, tenancyv1.Admins{Users: []string{"dave"}}, nss...)
	create(ctx, t, tn)
	waitReady(ctx, t, tn)
	mutate(ctx, t, tn, func(tn *tenancyv1.Tenant) { tn.Spec.Namespaces = tn.Spec.Namespaces[:2] })
	waitStalled(ctx, t, tn, controller.ReasonNamespaceDeletionBlocked)
	for _, ns := range nss {
		if err := as(t, "dave").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "work"}}); err != nil {
			t.Fatal(err)
		}
	}

	if err := env.Client.Delete(ctx, tn); err != nil {
		t.Fatal(err)
	}
	e2etest.WaitFor(t, 90*time.Second, "Tenant "+name+" gone", func() (bool, error) { return gone(ctx, tn) })
	for _, ns := range nss {
		if ok, err := gone(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); !ok {
			t.Errorf("Tenant %s is gone, but its namespace %s is still there (%v)", name, ns, err)
		}
	}
	var left corev1.NamespaceList
	if err := env.Client.List(ctx, &left, client.MatchingLabels{ensure.LabelOwnerUID: string(tn.UID)}); err != nil || len(left.Items) != 0 {
		t.Fatalf("namespaces still linked to the deleted Tenant: %d (%v)", len(left.Items), err)
	}
}

// TestDemoRunsBounded runs the README's demo in its bounded mode (what CI
// runs) so the demo cannot rot: an embedded control plane of its own, the
// operator as a user bound to its generated role, the samples, the admins'
// rights and refusals, the refused Tenants, the deletion gate and the
// deletion of a Tenant.
func TestDemoRunsBounded(t *testing.T) {
	ctx := e2etest.Context(t, 4*time.Minute)
	err := run(ctx, options{Flags: examplecmd.Flags{Embedded: true, ExitWhenReady: true, Timeout: 3 * time.Minute, MetricsAddr: "0", ProbeAddr: "0", LogFile: os.DevNull},
		adminRole: controller.DefaultAdminRole, concurrency: 4})
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
