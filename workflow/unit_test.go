package workflow_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta/testrestmapper"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/opkit/opkit/outcome"
	"github.com/opkit/opkit/workflow"
)

// createApplier creates a missing object as a controlled child of owner and
// otherwise writes nothing: enough to drive the graph in unit tests.
type createApplier struct {
	c       client.Client
	applied []string
	fail    map[string]error
}

func (a *createApplier) Apply(ctx context.Context, owner, obj client.Object, keep []client.Object) (bool, error) {
	a.applied = append(a.applied, obj.GetName())
	if err := a.fail[obj.GetName()]; err != nil {
		return false, err
	}
	o := obj.DeepCopyObject().(client.Object)
	if o.GetNamespace() == "" {
		o.SetNamespace(owner.GetNamespace())
	}
	err := a.c.Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopyObject().(client.Object))
	if !apierrors.IsNotFound(err) {
		return false, err
	}
	if err := controllerutil.SetControllerReference(owner, o, a.c.Scheme()); err != nil {
		return false, err
	}
	return true, a.c.Create(ctx, o)
}

// newFake is a fake client whose RESTMapper knows client-go's kinds.
func newFake(objs ...client.Object) client.WithWatch {
	return fake.NewClientBuilder().WithRESTMapper(testrestmapper.TestOnlyStaticRESTMapper(clientgoscheme.Scheme)).
		WithObjects(objs...).WithStatusSubresource(&batchv1.Job{}).Build()
}

func fakeOwner() *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "owner", UID: "owner-uid"}}
}

func cm(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": "v"}}
}

func job(name string) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func TestNewRejectsInvalidGraphs(t *testing.T) {
	c := newFake()
	for name, nodes := range map[string][]workflow.Node{
		"cycle":     {{Name: "a", Object: cm("a"), DependsOn: []string{"b"}}, {Name: "b", Object: cm("b"), DependsOn: []string{"a"}}},
		"self":      {{Name: "a", Object: cm("a"), DependsOn: []string{"a"}}},
		"unknown":   {{Name: "a", Object: cm("a"), DependsOn: []string{"x"}}},
		"duplicate": {{Name: "a", Object: cm("a")}, {Name: "a", Object: cm("b")}},
		"no object": {{Name: "a"}},
		"nil typed": {{Name: "a", Object: (*corev1.ConfigMap)(nil)}},
		"bad name":  {{Name: "-a", Object: cm("a")}},
		"no name":   {{Name: "a", Object: &corev1.ConfigMap{}}},
	} {
		if _, err := workflow.New(c, nil, nodes); !errors.Is(err, workflow.ErrInvalidGraph) {
			t.Errorf("%s: err %v, want ErrInvalidGraph", name, err)
		}
	}
	w, err := workflow.New(c, nil, []workflow.Node{
		{Name: "d", Object: cm("d"), DependsOn: []string{"b", "c"}},
		{Name: "b", Object: cm("b"), DependsOn: []string{"a"}},
		{Name: "c", Object: cm("c")},
		{Name: "a", Object: cm("a")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(w.Nodes(), ","); got != "c,a,b,d" {
		t.Fatalf("order %s, want c,a,b,d", got)
	}
}

// TestReconcileOrderAndIsolation drives a diamond plus an independent branch
// on a fake client: a → {b, job} → d, and e alone.
func TestReconcileOrderAndIsolation(t *testing.T) {
	ctx := context.Background()
	owner := fakeOwner()
	c := newFake(owner)
	a := &createApplier{c: c}
	nodes := []workflow.Node{
		{Name: "a", Object: cm("a")},
		{Name: "b", Object: cm("b"), DependsOn: []string{"a"}},
		{Name: "job", Object: job("job"), DependsOn: []string{"a"}},
		{Name: "d", Object: cm("d"), DependsOn: []string{"b", "job"}},
		{Name: "e", Object: cm("e")},
	}
	w, err := workflow.New(c, a, nodes)
	if err != nil {
		t.Fatal(err)
	}
	states := func(rep *workflow.Report) string {
		var s []string
		for _, r := range rep.Nodes {
			s = append(s, r.Name+"="+string(r.State))
		}
		return strings.Join(s, " ")
	}
	rep, err := w.Reconcile(ctx, owner)
	if rep == nil {
		t.Fatal(err)
	}
	if got, want := states(rep), "a=NotReady b=Waiting job=Waiting d=Waiting e=NotReady"; got != want {
		t.Fatalf("pass 1: %s, want %s", got, want)
	}
	if cl := outcome.Classify(err); cl.Class != outcome.ClassDependencyNotReady || !strings.Contains(cl.Message, `"a"`) {
		t.Fatalf("pass 1 error %v (%v)", err, cl)
	}
	rep, _ = w.Reconcile(ctx, owner)
	if got, want := states(rep), "a=Ready b=NotReady job=NotReady d=Waiting e=Ready"; got != want {
		t.Fatalf("pass 2: %s, want %s", got, want)
	}
	if r := rep.Node("d"); r.WaitingFor != "b" {
		t.Fatalf("d waits for %q, want b", r.WaitingFor)
	}
	// The Job is never complete on a fake client: d waits for it, b is ready.
	rep, err = w.Reconcile(ctx, owner)
	if got, want := states(rep), "a=Ready b=Ready job=NotReady d=Waiting e=Ready"; got != want {
		t.Fatalf("pass 3: %s, want %s", got, want)
	}
	if cl := outcome.Classify(err); !strings.Contains(cl.Message, `child "job"`) || !strings.Contains(cl.Message, `waiting for it: "d"`) {
		t.Fatalf("pass 3 summary %q does not name the job and its waiter", cl.Message)
	}
	// The Job fails: terminal, d keeps waiting, the rest stays ready.
	j := &batchv1.Job{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "job"}, j); err != nil {
		t.Fatal(err)
	}
	j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "too many failures"}}
	if err := c.Status().Update(ctx, j); err != nil {
		t.Fatal(err)
	}
	a.applied = nil
	rep, err = w.Reconcile(ctx, owner)
	if got, want := states(rep), "a=Ready b=Ready job=Failed d=Waiting e=Ready"; got != want {
		t.Fatalf("pass 4: %s, want %s", got, want)
	}
	if strings.Join(a.applied, ",") != "a,b,job,e" {
		t.Fatalf("applied %v: d must not be applied while its dependency failed", a.applied)
	}
	cl := outcome.Classify(err)
	if cl.Class != outcome.ClassTerminal || cl.Reason != workflow.ReasonNodeFailed || !strings.Contains(cl.Message, `child "job"`) {
		t.Fatalf("pass 4 summary %v, want terminal naming the job", cl)
	}
	// Retryable apply failure of e: returned as itself, ahead of the terminal one.
	a.fail = map[string]error{"e": apierrors.NewServiceUnavailable("down")}
	_, err = w.Reconcile(ctx, owner)
	if cl := outcome.Classify(err); cl.Class != outcome.ClassTransient || !strings.Contains(err.Error(), `"e"`) {
		t.Fatalf("transient apply failure summarised as %v (%v)", cl, err)
	}
}

func TestInactiveNode(t *testing.T) {
	ctx := context.Background()
	owner := fakeOwner()
	c := newFake(owner)
	a := &createApplier{c: c}
	active := true
	mk := func() *workflow.Workflow {
		w, err := workflow.New(c, a, []workflow.Node{
			{Name: "opt", Object: cm("opt"), Active: func() bool { return active }},
			{Name: "main", Object: cm("main"), DependsOn: []string{"opt"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	for range 3 {
		_, _ = mk().Reconcile(ctx, owner)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "opt"}, &corev1.ConfigMap{}); err != nil {
		t.Fatal(err)
	}
	// Someone else's object of an inactive node is left alone.
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "foreign"}}
	if err := c.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	active = false
	rep, err := mk().Reconcile(ctx, owner)
	if r := rep.Node("opt"); r.State != workflow.StateInactive || !r.Deleting {
		t.Fatalf("opt: %+v", r)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "opt"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("inactive node not deleted: %v", err)
	}
	if outcome.Classify(err).Class != outcome.ClassDependencyNotReady {
		t.Fatalf("deletion under way must not be success: %v", err)
	}
	rep, err = mk().Reconcile(ctx, owner)
	if err != nil || rep.Node("main").State != workflow.StateReady {
		t.Fatalf("after the inactive node is gone: %v %+v", err, rep.Node("main"))
	}
	w, err := workflow.New(c, a, []workflow.Node{{Name: "foreign", Object: cm("foreign"), Active: func() bool { return false }}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Reconcile(ctx, owner); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(other), &corev1.ConfigMap{}); err != nil {
		t.Fatalf("object not controlled by the owner was deleted: %v", err)
	}
}

func TestBuildSeesDependencies(t *testing.T) {
	ctx := context.Background()
	owner := fakeOwner()
	c := newFake(owner)
	a := &createApplier{c: c}
	var seen string
	w, err := workflow.New(c, a, []workflow.Node{
		{Name: "cfg", Object: cm("cfg")},
		{Name: "user", Object: cm("user"), DependsOn: []string{"cfg"},
			Build: func(_ context.Context, deps workflow.Deps) (client.Object, error) {
				seen = deps["cfg"].(*corev1.ConfigMap).Data["k"]
				return cm("user"), nil
			}},
		{Name: "wrong", Object: cm("wrong"), Build: func(context.Context, workflow.Deps) (client.Object, error) {
			return cm("other"), nil
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Reconcile(ctx, owner)
	rep, _ := w.Reconcile(ctx, owner)
	if seen != "v" {
		t.Fatalf("Build saw %q from its dependency", seen)
	}
	if r := rep.Node("wrong"); r.State != workflow.StateFailed || !r.Terminal {
		t.Fatalf("Build returning another object: %+v", r)
	}
}

func TestTeardownOrderFake(t *testing.T) {
	ctx := context.Background()
	owner := fakeOwner()
	c := newFake(owner)
	a := &createApplier{c: c}
	w, err := workflow.New(c, a, []workflow.Node{
		{Name: "a", Object: cm("a")},
		{Name: "b", Object: cm("b"), DependsOn: []string{"a"}},
		{Name: "c", Object: cm("c"), DependsOn: []string{"b"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		_, _ = w.Reconcile(ctx, owner)
	}
	var order []string
	for range 5 {
		rep, err := w.Teardown(ctx, owner)
		order = append(order, rep.Deleted...)
		if rep.Done {
			if err != nil {
				t.Fatal(err)
			}
			break
		}
		if outcome.Classify(err).Class != outcome.ClassDependencyNotReady {
			t.Fatalf("unfinished teardown: %v", err)
		}
	}
	if strings.Join(order, ",") != "c,b,a" {
		t.Fatalf("teardown order %v, want c,b,a", order)
	}
}

func TestDefaultReadiness(t *testing.T) {
	dep := func(gen, obs int64, replicas, updated, avail, total int32, available corev1.ConditionStatus) *appsv1.Deployment {
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Generation: gen},
			Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(replicas)},
			Status: appsv1.DeploymentStatus{ObservedGeneration: obs, Replicas: total, UpdatedReplicas: updated, AvailableReplicas: avail,
				Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: available}}},
		}
	}
	sts := func(replicas, ready, updated int32, partition *int32, cur, upd string) *appsv1.StatefulSet {
		s := &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(replicas)},
			Status: appsv1.StatefulSetStatus{ReadyReplicas: ready, UpdatedReplicas: updated, CurrentRevision: cur, UpdateRevision: upd}}
		if partition != nil {
			s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: partition}}
		}
		return s
	}
	toU := func(o client.Object, kind string) *unstructured.Unstructured {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: m}
		gvk, _, _ := clientgoscheme.Scheme.ObjectKinds(o)
		u.SetGroupVersionKind(gvk[0])
		_ = kind
		return u
	}
	type want struct{ ready, failed bool }
	for name, tc := range map[string]struct {
		obj  client.Object
		want want
	}{
		"deployment rolled out":          {dep(2, 2, 2, 2, 2, 2, corev1.ConditionTrue), want{ready: true}},
		"deployment generation unseen":   {dep(3, 2, 2, 2, 2, 2, corev1.ConditionTrue), want{}},
		"deployment old replicas left":   {dep(2, 2, 2, 2, 2, 3, corev1.ConditionTrue), want{}},
		"deployment not updated":         {dep(2, 2, 2, 1, 2, 2, corev1.ConditionTrue), want{}},
		"deployment unavailable":         {dep(2, 2, 2, 2, 1, 2, corev1.ConditionTrue), want{}},
		"deployment Available=False":     {dep(2, 2, 2, 2, 2, 2, corev1.ConditionFalse), want{}},
		"deployment unstructured":        {toU(dep(2, 2, 2, 2, 2, 2, corev1.ConditionTrue), ""), want{ready: true}},
		"statefulset done":               {sts(3, 3, 3, nil, "r2", "r2"), want{ready: true}},
		"statefulset revision pending":   {sts(3, 3, 3, nil, "r1", "r2"), want{}},
		"statefulset partition reached":  {sts(3, 3, 1, ptr.To[int32](2), "r1", "r2"), want{ready: true}},
		"statefulset partition pending":  {sts(3, 3, 0, ptr.To[int32](2), "r1", "r2"), want{}},
		"statefulset replicas not ready": {sts(3, 2, 3, nil, "r2", "r2"), want{}},
		"job complete": {&batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}}, want{ready: true}},
		"job failed": {&batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue}}}}, want{failed: true}},
		"job running":  {&batchv1.Job{}, want{}},
		"pvc bound":    {&corev1.PersistentVolumeClaim{Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}, want{ready: true}},
		"pvc pending":  {&corev1.PersistentVolumeClaim{Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}}, want{}},
		"pvc lost":     {&corev1.PersistentVolumeClaim{Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimLost}}, want{failed: true}},
		"service":      {&corev1.Service{}, want{ready: true}},
		"lb pending":   {&corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}}, want{}},
		"lb addressed": {&corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}, Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "10.0.0.1"}}}}}, want{ready: true}},
		"daemonset":    {&appsv1.DaemonSet{Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 2, UpdatedNumberScheduled: 2, NumberAvailable: 1}}, want{}},
		"configmap":    {cm("x"), want{ready: true}},
		"custom resource InProgress": {&unstructured.Unstructured{Object: map[string]any{"apiVersion": "x.dev/v1", "kind": "Thing",
			"metadata": map[string]any{"name": "t", "generation": int64(1)},
			"status":   map[string]any{"observedGeneration": int64(1), "conditions": []any{map[string]any{"type": "Ready", "status": "False", "reason": "Waiting"}}}}}, want{}},
		"custom resource Current": {&unstructured.Unstructured{Object: map[string]any{"apiVersion": "x.dev/v1", "kind": "Thing",
			"metadata": map[string]any{"name": "t", "generation": int64(1)},
			"status":   map[string]any{"observedGeneration": int64(1), "conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Ok"}}}}}, want{ready: true}},
	} {
		got := workflow.Default(tc.obj)
		if got.Ready != tc.want.ready || (!got.Ready && got.Failed != tc.want.failed) {
			t.Errorf("%s: %+v, want ready=%v failed=%v", name, got, tc.want.ready, tc.want.failed)
		}
	}
}

// TestInactiveNodeOfUnservedKind: an optional child whose kind is not
// installed is inactive and absent; an active one is an error.
func TestInactiveNodeOfUnservedKind(t *testing.T) {
	ctx := context.Background()
	owner := fakeOwner()
	c := newFake(owner)
	route := &unstructured.Unstructured{}
	route.SetAPIVersion("route.example.com/v1")
	route.SetKind("Route")
	route.SetName("r")
	for _, active := range []bool{false, true} {
		w, err := workflow.New(c, &createApplier{c: c}, []workflow.Node{
			{Name: "cfg", Object: cm("cfg")},
			{Name: "route", Object: route, DependsOn: []string{"cfg"}, Active: func() bool { return active }},
		})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := w.Reconcile(ctx, owner)
		if active {
			if err == nil || rep != nil {
				t.Fatalf("active node of an unserved kind: %v", err)
			}
			continue
		}
		if r := rep.Node("route"); err == nil || r.State != workflow.StateInactive || r.Deleting {
			t.Fatalf("inactive node of an unserved kind: %+v (%v)", r, err)
		}
		// Teardown skips the unserved kind and deletes cfg.
		if tr, err := w.Teardown(ctx, owner); tr == nil || strings.Join(tr.Deleted, ",") != "cfg" {
			t.Fatalf("teardown with an unserved kind: %+v (%v)", tr, err)
		}
	}
}
