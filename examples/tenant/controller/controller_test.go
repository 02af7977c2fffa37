package controller

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tenancyv1 "github.com/opkit/opkit/examples/tenant/api/v1alpha1"
)

func tenant(nss ...tenancyv1.Namespace) *tenancyv1.Tenant {
	return &tenancyv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "team", UID: "uid-1"}, Spec: tenancyv1.TenantSpec{Namespaces: nss}}
}

// Children declares the Namespace first (so a refused namespace stops the
// rest), the defaults where the spec is silent, the spec where it is not,
// and a RoleBinding only when there are admins.
func TestChildren(t *testing.T) {
	tn := tenant("team-dev")
	objs := Children(tn, "team-dev", "viewer")
	if len(objs) != 5 {
		t.Fatalf("without admins: %d objects, want 5 (no RoleBinding)", len(objs))
	}
	if _, ok := objs[0].(*corev1.Namespace); !ok {
		t.Fatalf("first child %T, want the Namespace", objs[0])
	}
	q := objs[1].(*corev1.ResourceQuota)
	if !equal(q.Spec.Hard, DefaultQuota) || q.Namespace != "team-dev" {
		t.Errorf("quota %s/%v, want the default in team-dev", q.Namespace, q.Spec.Hard)
	}
	// The defaults are copies: a child never aliases the package's maps.
	q.Spec.Hard[corev1.ResourcePods] = resource.MustParse("1")
	if DefaultQuota.Pods().Value() != 20 {
		t.Fatal("Children returned the package's default quota itself")
	}
	allow := objs[4].(*networkingv1.NetworkPolicy)
	if allow.Spec.Ingress[0].From[0].NamespaceSelector.MatchLabels[LabelTenant] != "team" {
		t.Errorf("allow policy selects %v", allow.Spec.Ingress[0].From[0].NamespaceSelector)
	}

	tn.Spec.Admins = tenancyv1.Admins{Users: []string{"alice"}, Groups: []string{"ops"}}
	tn.Spec.Quota = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("3")}
	tn.Spec.Limits.Max = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
	objs = Children(tn, "team-dev", "viewer")
	if len(objs) != 6 {
		t.Fatalf("with admins: %d objects, want 6", len(objs))
	}
	if q := objs[1].(*corev1.ResourceQuota); !equal(q.Spec.Hard, tn.Spec.Quota) {
		t.Errorf("quota %v, want the spec's %v", q.Spec.Hard, tn.Spec.Quota)
	}
	lr := objs[2].(*corev1.LimitRange).Spec.Limits[0]
	if !equal(lr.Max, tn.Spec.Limits.Max) || !equal(lr.Default, DefaultLimit) || !equal(lr.DefaultRequest, DefaultRequest) {
		t.Errorf("limits %+v", lr)
	}
	rb := objs[5].(*rbacv1.RoleBinding)
	want := []rbacv1.Subject{
		{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"},
		{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "ops"},
	}
	if rb.RoleRef.Name != "viewer" || rb.RoleRef.Kind != "ClusterRole" || !slices.Equal(rb.Subjects, want) {
		t.Errorf("RoleBinding %v %v", rb.RoleRef, rb.Subjects)
	}
}

// observe gives every listed namespace a phase, in spec order, then every
// owned namespace no longer listed, by name: Retained behind a closed gate,
// Terminating once deleted or with the gate open.
func TestObserve(t *testing.T) {
	now := metav1.NewTime(time.Now())
	ns := func(name string, deleting bool) corev1.Namespace {
		n := corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if deleting {
			n.DeletionTimestamp = &now
		}
		return n
	}
	tn := tenant("b", "a", "gone-soon", "foreign")
	owned := []corev1.Namespace{ns("a", false), ns("b", false), ns("gone-soon", true), ns("z-old", false), ns("m-old", true)}

	phases := func(st []tenancyv1.NamespaceStatus) []string {
		var out []string
		for _, s := range st {
			out = append(out, s.Name+":"+string(s.Phase))
		}
		return out
	}
	got := phases(observe(tn, owned, nil))
	want := []string{"b:Ready", "a:Ready", "gone-soon:Terminating", "foreign:Ready", "m-old:Terminating", "z-old:Retained"}
	if !slices.Equal(got, want) {
		t.Errorf("after a successful ensure: %v, want %v", got, want)
	}
	got = phases(observe(tn, owned, []string{"foreign"}))
	want = []string{"b:Ready", "a:Ready", "gone-soon:Terminating", "foreign:Refused", "m-old:Terminating", "z-old:Retained"}
	if !slices.Equal(got, want) {
		t.Errorf("with a refusal: %v, want %v", got, want)
	}
	got = phases(observe(tenant("new", "foreign"), nil, []string{"foreign"}))
	if want := []string{"new:Pending", "foreign:Refused"}; !slices.Equal(got, want) {
		t.Errorf("nothing created yet: %v, want %v", got, want)
	}
	tn.Annotations = map[string]string{tenancyv1.AllowNamespaceDeletionAnnotation: "true"}
	got = phases(observe(tn, owned, nil))
	if got[len(got)-1] != "z-old:Terminating" {
		t.Errorf("gate open: %v, want z-old Terminating", got)
	}
	tn.Annotations[tenancyv1.AllowNamespaceDeletionAnnotation] = "yes"
	if got := phases(observe(tn, owned, nil)); got[len(got)-1] != "z-old:Retained" {
		t.Errorf(`only "true" opens the gate: %v`, got)
	}
}

func equal(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w.Cmp(v) != 0 {
			return false
		}
	}
	return true
}
