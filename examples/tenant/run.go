package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/examples/internal/examplecmd"
	tenancyv1 "github.com/opkit/opkit/examples/tenant/api/v1alpha1"
	"github.com/opkit/opkit/examples/tenant/config"
	"github.com/opkit/opkit/examples/tenant/controller"
	"github.com/opkit/opkit/observability"
	"github.com/opkit/opkit/testenv"
)

// DemoNamespace holds the embedded demo's metrics-reader ServiceAccount.
const DemoNamespace = "tenant-system"

// OperatorUser is the user the embedded demo runs the operator as: bound to
// the generated ClusterRole (config/rbac/role.yaml) and the metrics-auth role,
// nothing else — so the API server's RBAC escalation check applies to it as it
// would to the operator's ServiceAccount on a cluster.
const OperatorUser = "tenant-operator"

// The tour's Tenants and people (config/samples/tenants.yaml).
const (
	tourTenant  = "team-a" // loses a namespace behind the deletion gate
	tourRemoved = "team-a-prod"
	doomed      = "team-b" // deleted at the end of the bounded tour
	alice       = "alice"  // team-a's admin
	bob         = "bob"    // team-b's admin
)

func newScheme() (*runtime.Scheme, error) { return examplecmd.NewScheme(tenancyv1.AddToScheme) }

func run(ctx context.Context, o options) error {
	cfg, err := o.ClusterConfig()
	if err != nil {
		return err
	}
	embedded := cfg == nil
	closeLog, err := o.SetLogger(narrator, embedded)
	if err != nil {
		return err
	}
	defer closeLog()
	scheme, err := newScheme()
	if err != nil {
		return err
	}
	selector := labels.Everything()
	if o.selector != "" {
		if selector, err = labels.Parse(o.selector); err != nil {
			return fmt.Errorf("--tenant-selector: %w", err)
		}
	}
	var env *testenv.Env
	if embedded {
		crds, err := config.CRDs()
		if err != nil {
			return err
		}
		var stop func()
		// Workloads mode: kube-controller-manager's namespace controller empties
		// and removes deleted namespaces, its quota controller tracks usage.
		env, stop, err = narrator.StartControlPlane("kube-apiserver, etcd, controller-manager, scheduler, kwok node",
			testenv.WithWorkloads(), testenv.WithCRDs(crds...), testenv.WithScheme(scheme), testenv.WithBuildIfMissing())
		if err != nil {
			return err
		}
		defer stop()
		if cfg, err = operatorIdentity(ctx, env); err != nil {
			return err
		}
		say("the operator runs as user %s, bound only to the generated ClusterRole (no bind, escalate, impersonate or wildcard)", OperatorUser)
	}
	o.DefaultAddrs(embedded)

	if o.WatchNamespace != "" {
		return errors.New("--watch-namespace: Tenants are cluster-scoped and own namespaces; the tenant operator cannot be limited to one namespace")
	}
	mopts := o.ManagerOptions(scheme, "tenant-operator.tenancy.example.com")
	mopts.Cache = controller.CacheOptions(selector)
	mgr, err := ctrl.NewManager(cfg, mopts)
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	obs, err := observability.Setup(mgr)
	if err != nil {
		return err
	}
	if err := controller.Setup(mgr, controller.Options{Observability: obs, DefaultAdminRole: o.adminRole, Concurrency: o.concurrency}); err != nil {
		return err
	}
	if !embedded {
		return mgr.Start(ctx)
	}

	ctx, bg := examplecmd.StartBackground(ctx, mgr)
	defer bg.Cancel()
	d := &demo{env: env, c: env.Client}
	d.steps = examplecmd.Tour[[]tenancyv1.Tenant]{Narrator: narrator, Interval: 200 * time.Millisecond, Errc: bg.Err(),
		Read: func(ctx context.Context) ([]tenancyv1.Tenant, string, error) { return progress(ctx, d.c) }}
	if o.ExitWhenReady {
		d.steps.Deadline = time.Now().Add(o.Timeout)
	}
	if err := d.tour(ctx, o); err != nil {
		return err
	}
	if o.ExitWhenReady {
		say("tour complete; exiting as asked")
		bg.Stop()
		return nil
	}
	say("tour complete; the operator keeps running (Ctrl-C to stop). Try: kubectl delete tenant %s", doomed)
	return d.steps.Until(ctx, "", func([]tenancyv1.Tenant) bool { return false })
}

// operatorIdentity installs the ClusterRoles of config/rbac (the operator's
// generated role, tenant-admin, the metrics roles), binds the operator's and
// the metrics-auth role to [OperatorUser], and returns a config that
// authenticates as that user.
func operatorIdentity(ctx context.Context, env *testenv.Env) (*rest.Config, error) {
	objs, err := config.RBAC()
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if o.GetKind() != "ClusterRole" {
			continue
		}
		if err := env.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("install ClusterRole %s: %w", o.GetName(), err)
		}
	}
	for _, role := range []string{"manager-role", "metrics-auth-role"} {
		crb := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: OperatorUser + "-" + role},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: OperatorUser}},
		}
		if err := env.Client.Create(ctx, crb); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("bind %s: %w", role, err)
		}
	}
	user, err := env.Envtest.AddUser(envtest.User{Name: OperatorUser}, &rest.Config{QPS: 50, Burst: 100})
	if err != nil {
		return nil, err
	}
	return user.Config(), nil
}

// demo drives and narrates the tour.
type demo struct {
	env   *testenv.Env
	c     client.Client
	steps examplecmd.Tour[[]tenancyv1.Tenant]
}

func (d *demo) tour(ctx context.Context, o options) error {
	names, err := applySamples(ctx, d.c)
	if err != nil {
		return err
	}
	kubectl, err := narrator.Kubectl(ctx, d.env)
	if err != nil {
		return err
	}
	if err := narrator.SayEndpoints(ctx, d.env, &o.Flags, DemoNamespace, kubectl); err != nil {
		return err
	}
	say("watch it:  %s get tenants; %s get namespaces -L %s", kubectl, kubectl, controller.LabelTenant)
	say("or:        %s wait --for=condition=Ready tenants --all", kubectl)
	if err := d.steps.Until(ctx, "every sample Tenant is Ready", func(ts []tenancyv1.Tenant) bool {
		return len(ts) == len(names) && allReady(ts)
	}); err != nil {
		return err
	}

	say("1/4 what the admins may do, asked of the API server as them (impersonation):")
	if err := d.tryAsAdmins(ctx); err != nil {
		return err
	}

	say("2/4 Tenants the operator refuses: one asking for cluster-admin, one listing %s's namespace", tourTenant)
	if err := d.refusals(ctx); err != nil {
		return err
	}

	say("3/4 removing %s from %s: kept behind the deletion gate until the Tenant is annotated", tourRemoved, tourTenant)
	if err := d.removeNamespace(ctx); err != nil {
		return err
	}
	if !o.ExitWhenReady {
		return nil
	}
	say("4/4 deleting Tenant %s: its namespaces and everything in them go before the finalizer lets it go", doomed)
	t := &tenancyv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: doomed}}
	if err := d.c.Get(ctx, client.ObjectKeyFromObject(t), t); err != nil {
		return err
	}
	if err := d.c.Delete(ctx, t); err != nil {
		return err
	}
	if err := d.steps.Until(ctx, "Tenant "+doomed+" gone", func(ts []tenancyv1.Tenant) bool { return find(ts, doomed) == nil }); err != nil {
		return err
	}
	var left corev1.NamespaceList
	if err := d.c.List(ctx, &left, client.MatchingLabels{controller.LabelTenant: doomed}); err != nil {
		return err
	}
	if n := len(left.Items); n != 0 {
		return fmt.Errorf("tenant %s is gone but %d of its namespaces are left", doomed, n)
	}
	say("no namespace of %s is left (the finalizer waited until an uncached list found none)", doomed)
	return nil
}

// tryAsAdmins asks the API server, as alice and bob, for what tenant
// isolation must allow and refuse, and fails the tour on any surprise.
func (d *demo) tryAsAdmins(ctx context.Context) error {
	as := func(user string) (client.Client, error) {
		cfg := rest.CopyConfig(d.env.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
		return client.New(cfg, client.Options{Scheme: d.c.Scheme()})
	}
	a, err := as(alice)
	if err != nil {
		return err
	}
	b, err := as(bob)
	if err != nil {
		return err
	}
	big := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a-dev", Name: "too-big"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "registry.example/app:1",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("8Gi")}},
		}}},
	}
	checks := []struct {
		who, what string
		allowed   bool
		do        func() error
	}{
		{alice, "create a ConfigMap in team-a-dev", true, func() error {
			return a.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a-dev", Name: "settings"}})
		}},
		{alice, "list Pods in team-b-dev", false, func() error { return a.List(ctx, &corev1.PodList{}, client.InNamespace("team-b-dev")) }},
		{bob, "read Namespace team-a-dev", false, func() error { return b.Get(ctx, client.ObjectKey{Name: "team-a-dev"}, &corev1.Namespace{}) }},
		{alice, "raise the ResourceQuota of team-a-dev", false, func() error {
			q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a-dev", Name: controller.QuotaName}}
			return a.Patch(ctx, q, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"hard":{"pods":"1000"}}}`)))
		}},
		{alice, "delete the default-deny NetworkPolicy of team-a-dev", false, func() error {
			return a.Delete(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a-dev", Name: controller.DenyPolicyName}})
		}},
		{alice, "create a Pod with an 8Gi memory limit in team-a-dev (LimitRange max 4Gi)", false, func() error { return a.Create(ctx, big) }},
		{alice, "create a Tenant", false, func() error {
			return a.Create(ctx, &tenancyv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "alice-own"}, Spec: tenancyv1.TenantSpec{Namespaces: []tenancyv1.Namespace{"alice-own"}}})
		}},
	}
	for _, c := range checks {
		err := c.do()
		verdict := "allowed"
		if err != nil {
			verdict = "refused: " + firstLine(err.Error())
		}
		say("    %-5s %-75s %s", c.who, c.what, verdict)
		if (err == nil) != c.allowed {
			return fmt.Errorf("%s %s: want allowed=%v, got %s", c.who, c.what, c.allowed, verdict)
		}
	}
	return nil
}

// refusals applies a Tenant asking for cluster-admin and one listing a
// namespace of another Tenant, shows both Stalled with nothing created, and
// deletes them.
func (d *demo) refusals(ctx context.Context) error {
	bad := []*tenancyv1.Tenant{
		{ObjectMeta: metav1.ObjectMeta{Name: "greedy"}, Spec: tenancyv1.TenantSpec{
			Namespaces: []tenancyv1.Namespace{"greedy-dev"}, AdminRole: "cluster-admin",
			Admins: tenancyv1.Admins{Users: []string{"mallory"}},
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: "squatter"}, Spec: tenancyv1.TenantSpec{
			Namespaces: []tenancyv1.Namespace{"squatter-dev", "team-a-dev"},
			Admins:     tenancyv1.Admins{Users: []string{"mallory"}},
		}},
	}
	for _, t := range bad {
		if err := d.c.Create(ctx, t); err != nil {
			return err
		}
	}
	if err := d.steps.Until(ctx, "both are Stalled", func(ts []tenancyv1.Tenant) bool {
		for _, t := range bad {
			if f := find(ts, t.Name); f == nil || !conditions.IsTrue(f, conditions.Stalled) {
				return false
			}
		}
		return true
	}); err != nil {
		return err
	}
	for _, t := range bad {
		for _, ns := range t.Spec.Namespaces {
			var live corev1.Namespace
			err := d.c.Get(ctx, client.ObjectKey{Name: string(ns)}, &live)
			switch {
			case apierrors.IsNotFound(err):
				say("    %s: namespace %s was not created", t.Name, ns)
			case err != nil:
				return err
			case live.Labels[controller.LabelTenant] != t.Name:
				say("    %s: namespace %s is untouched (still %s's)", t.Name, ns, live.Labels[controller.LabelTenant])
			default:
				return fmt.Errorf("tenant %s got namespace %s", t.Name, ns)
			}
		}
		if err := d.c.Delete(ctx, t); err != nil {
			return err
		}
	}
	return d.steps.Until(ctx, "deleted both", func(ts []tenancyv1.Tenant) bool {
		return find(ts, "greedy") == nil && find(ts, "squatter") == nil
	})
}

// removeNamespace drops tourRemoved from tourTenant's list, waits for it to
// be Retained (Stalled, NamespaceDeletionBlocked), then opens the gate and
// waits until it is gone and the Tenant is Ready again.
func (d *demo) removeNamespace(ctx context.Context) error {
	t := &tenancyv1.Tenant{}
	if err := d.c.Get(ctx, client.ObjectKey{Name: tourTenant}, t); err != nil {
		return err
	}
	patch := client.MergeFrom(t.DeepCopy())
	var kept []tenancyv1.Namespace
	for _, ns := range t.Spec.Namespaces {
		if ns != tourRemoved {
			kept = append(kept, ns)
		}
	}
	t.Spec.Namespaces = kept
	if err := d.c.Patch(ctx, t, patch); err != nil {
		return err
	}
	if err := d.steps.Until(ctx, tourRemoved+" is kept, and the Tenant says why", func(ts []tenancyv1.Tenant) bool {
		f := find(ts, tourTenant)
		return f != nil && conditions.IsTrue(f, conditions.Stalled) && phase(f, tourRemoved) == tenancyv1.NamespaceRetained
	}); err != nil {
		return err
	}
	say("    kubectl annotate tenant %s %s=true", tourTenant, tenancyv1.AllowNamespaceDeletionAnnotation)
	ann := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"true"}}}`, tenancyv1.AllowNamespaceDeletionAnnotation))
	if err := d.c.Patch(ctx, &tenancyv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: tourTenant}}, ann); err != nil {
		return err
	}
	return d.steps.Until(ctx, tourRemoved+" deleted with everything in it; "+tourTenant+" Ready again", func(ts []tenancyv1.Tenant) bool {
		f := find(ts, tourTenant)
		if f == nil || !ready(f) || phase(f, tourRemoved) != "" {
			return false
		}
		err := d.c.Get(ctx, client.ObjectKey{Name: tourRemoved}, &corev1.Namespace{})
		return apierrors.IsNotFound(err)
	})
}

// applySamples creates the sample Tenants (cluster-scoped) and returns their names.
func applySamples(ctx context.Context, c client.Client) ([]string, error) {
	samples, err := config.Samples()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range samples {
		if err := c.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("apply sample %s: %w", s.GetName(), err)
		}
		names = append(names, s.GetName())
		say("applied %s %s", s.GetKind(), s.GetName())
	}
	return names, nil
}

// progress renders one line per Tenant: Ready, its reason and each namespace's phase.
func progress(ctx context.Context, c client.Client) ([]tenancyv1.Tenant, string, error) {
	var list tenancyv1.TenantList
	if err := c.List(ctx, &list); err != nil {
		return nil, "", err
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	var b strings.Builder
	for i := range list.Items {
		t := &list.Items[i]
		state, reason := "Unknown", conditions.ReasonNotYetReported
		if r := conditions.Get(t, conditions.Ready); r != nil {
			state, reason = string(r.Status), r.Reason
		}
		var nss []string
		for _, ns := range t.Status.Namespaces {
			nss = append(nss, ns.Name+":"+string(ns.Phase))
		}
		fmt.Fprintf(&b, "  tenant %-8s Ready=%-7s (%s) %s\n", t.Name, state, reason, strings.Join(nss, " "))
	}
	return list.Items, b.String(), nil
}

func ready(t *tenancyv1.Tenant) bool {
	return conditions.IsTrue(t, conditions.Ready) && t.Status.ObservedGeneration == t.Generation
}

func allReady(ts []tenancyv1.Tenant) bool {
	for i := range ts {
		if !ready(&ts[i]) {
			return false
		}
	}
	return true
}

func find(ts []tenancyv1.Tenant, name string) *tenancyv1.Tenant {
	for i := range ts {
		if ts[i].Name == name {
			return &ts[i]
		}
	}
	return nil
}

func phase(t *tenancyv1.Tenant, ns string) tenancyv1.NamespacePhase {
	for _, s := range t.Status.Namespaces {
		if s.Name == ns {
			return s.Phase
		}
	}
	return ""
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 110 {
		s = s[:110] + "…"
	}
	return s
}

func say(format string, args ...any) { narrator.Say(format, args...) }
