package conditions_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/outcome"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newClock() *clocktesting.FakePassiveClock { return clocktesting.NewFakePassiveClock(t0) }

func gizmo(gen int64) *Gizmo {
	return &Gizmo{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", Generation: gen}}
}

func uGizmo(gen int64) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gizmoGV.WithKind("Gizmo"))
	u.SetNamespace("ns")
	u.SetName("u")
	u.SetGeneration(gen)
	return u
}

func cond(t string, s metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg}
}

func mustSet(t *testing.T, obj client.Object, c metav1.Condition, opts ...conditions.SetOption) {
	t.Helper()
	if err := conditions.Set(obj, c, opts...); err != nil {
		t.Fatal(err)
	}
}

func mustList(t *testing.T, obj client.Object) []metav1.Condition {
	t.Helper()
	cs, err := conditions.List(obj)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func typeNames(cs []metav1.Condition) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.Type)
	}
	return out
}

func TestAccessLayouts(t *testing.T) {
	ps := &pointerStatus{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 2}}
	cu := &custom{ObjectMeta: metav1.ObjectMeta{Name: "c", Generation: 2}}
	writable := []struct {
		name string
		obj  client.Object
		read func() []metav1.Condition
	}{
		{"typed struct by reflection", gizmo(2), nil},
		{"nil pointer status is allocated", ps, func() []metav1.Condition { return ps.Status.Conditions }},
		{"Accessor interface wins", cu, func() []metav1.Condition { return cu.State.Health }},
		{"unstructured", uGizmo(2), nil},
	}
	for _, tt := range writable {
		t.Run(tt.name, func(t *testing.T) {
			if cs := mustList(t, tt.obj); len(cs) != 0 {
				t.Fatalf("fresh object has conditions %v", cs)
			}
			mustSet(t, tt.obj, cond("Ready", metav1.ConditionTrue, "Done", "ok"))
			got := conditions.Get(tt.obj, "Ready")
			if got == nil || got.Status != metav1.ConditionTrue || got.ObservedGeneration != 2 {
				t.Fatalf("Get = %+v", got)
			}
			if tt.read != nil && len(tt.read()) != 1 {
				t.Fatalf("condition not stored in the object's own field: %v", tt.read())
			}
			if !conditions.IsTrue(tt.obj, "Ready") {
				t.Fatal("IsTrue false")
			}
		})
	}
	unsupported := []struct {
		name string
		obj  client.Object
	}{
		{"no status", &noStatus{}},
		{"ConfigMap", &corev1.ConfigMap{}},
		{"nil pointer", (*Gizmo)(nil)},
	}
	for _, tt := range unsupported {
		t.Run(tt.name, func(t *testing.T) {
			err := conditions.Set(tt.obj, cond("Ready", metav1.ConditionTrue, "Done", ""))
			if !errors.Is(err, conditions.ErrNoConditions) {
				t.Fatalf("Set: want ErrNoConditions, got %v", err)
			}
			if _, err := conditions.List(tt.obj); !errors.Is(err, conditions.ErrNoConditions) {
				t.Fatalf("List: want ErrNoConditions, got %v", err)
			}
			if err := conditions.Remove(tt.obj, "Ready"); !errors.Is(err, conditions.ErrNoConditions) {
				t.Fatalf("Remove: want ErrNoConditions, got %v", err)
			}
			if conditions.IsTrue(tt.obj, "Ready") || conditions.IsFalse(tt.obj, "Ready") || conditions.IsUnknown(tt.obj, "Ready") || conditions.Get(tt.obj, "Ready") != nil {
				t.Fatal("predicates must be false for an object without conditions")
			}
			if err := conditions.MarkReady(tt.obj, "Done", ""); !errors.Is(err, conditions.ErrNoConditions) {
				t.Fatalf("MarkReady: want ErrNoConditions, got %v", err)
			}
		})
	}
	t.Run("foreign condition type is read-only", func(t *testing.T) {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}}
		d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", Message: "ok"}}
		if !conditions.IsTrue(d, "Available") {
			t.Fatal("cannot read a Deployment's Available condition")
		}
		err := conditions.Set(d, cond("Ready", metav1.ConditionTrue, "Done", ""))
		if !errors.Is(err, conditions.ErrNoConditions) || !strings.Contains(err.Error(), "read-only") {
			t.Fatalf("want a read-only error, got %v", err)
		}
	})
	t.Run("error names the object", func(t *testing.T) {
		err := conditions.Set(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "b"}}, cond("Ready", metav1.ConditionTrue, "Done", ""))
		if err == nil || !strings.Contains(err.Error(), "a/b") {
			t.Fatalf("error does not name namespace/name: %v", err)
		}
	})
}

func TestSetRules(t *testing.T) {
	later := t0.Add(90*time.Minute + 500*time.Millisecond)
	tests := []struct {
		name     string
		existing []metav1.Condition
		set      metav1.Condition
		gen      int64
		want     metav1.Condition
	}{
		{
			name: "new condition: lastTransitionTime now (whole seconds), observedGeneration = generation",
			set:  cond("Ready", metav1.ConditionTrue, "Done", "m"), gen: 3,
			want: metav1.Condition{Type: "Ready", Status: "True", Reason: "Done", Message: "m", ObservedGeneration: 3, LastTransitionTime: metav1.NewTime(later.Truncate(time.Second))},
		},
		{
			name:     "same status: reason, message, observedGeneration in place; lastTransitionTime kept",
			existing: []metav1.Condition{{Type: "Ready", Status: "True", Reason: "Old", Message: "old", ObservedGeneration: 1, LastTransitionTime: metav1.NewTime(t0)}},
			set:      cond("Ready", metav1.ConditionTrue, "New", "new"), gen: 4,
			want: metav1.Condition{Type: "Ready", Status: "True", Reason: "New", Message: "new", ObservedGeneration: 4, LastTransitionTime: metav1.NewTime(t0)},
		},
		{
			name:     "status change moves lastTransitionTime",
			existing: []metav1.Condition{{Type: "Ready", Status: "True", Reason: "Done", ObservedGeneration: 1, LastTransitionTime: metav1.NewTime(t0)}},
			set:      cond("Ready", metav1.ConditionFalse, "Done", ""), gen: 1,
			want: metav1.Condition{Type: "Ready", Status: "False", Reason: "Done", ObservedGeneration: 1, LastTransitionTime: metav1.NewTime(later.Truncate(time.Second))},
		},
		{
			name:     "caller's lastTransitionTime and observedGeneration are ignored",
			existing: []metav1.Condition{{Type: "Ready", Status: "True", Reason: "Done", LastTransitionTime: metav1.NewTime(t0)}},
			set:      metav1.Condition{Type: "Ready", Status: "True", Reason: "Done", ObservedGeneration: 99, LastTransitionTime: metav1.NewTime(t0.Add(time.Hour))}, gen: 2,
			want: metav1.Condition{Type: "Ready", Status: "True", Reason: "Done", ObservedGeneration: 2, LastTransitionTime: metav1.NewTime(t0)},
		},
		{
			name:     "existing condition without lastTransitionTime gets one",
			existing: []metav1.Condition{{Type: "Ready", Status: "True", Reason: "Done"}},
			set:      cond("Ready", metav1.ConditionTrue, "Done", ""), gen: 1,
			want: metav1.Condition{Type: "Ready", Status: "True", Reason: "Done", ObservedGeneration: 1, LastTransitionTime: metav1.NewTime(later.Truncate(time.Second))},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := gizmo(tt.gen)
			g.Status.Conditions = slices.Clone(tt.existing)
			mustSet(t, g, tt.set, conditions.WithClock(clocktesting.NewFakePassiveClock(later)))
			if len(g.Status.Conditions) != 1 {
				t.Fatalf("want one condition, got %v", g.Status.Conditions)
			}
			got := g.Status.Conditions[0]
			if !got.LastTransitionTime.Equal(&tt.want.LastTransitionTime) {
				t.Errorf("lastTransitionTime %v, want %v", got.LastTransitionTime, tt.want.LastTransitionTime)
			}
			got.LastTransitionTime, tt.want.LastTransitionTime = metav1.Time{}, metav1.Time{}
			if got != tt.want {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
	t.Run("duplicates of a type are dropped", func(t *testing.T) {
		g := gizmo(1)
		g.Status.Conditions = []metav1.Condition{
			{Type: "A", Status: "True", Reason: "X"}, {Type: "A", Status: "False", Reason: "Y"},
			{Type: "B", Status: "True", Reason: "X"}, {Type: "B", Status: "False", Reason: "Y"},
		}
		mustSet(t, g, cond("A", metav1.ConditionTrue, "Z", ""), conditions.WithClock(newClock()))
		if got := typeNames(g.Status.Conditions); !slices.Equal(got, []string{"A", "B"}) {
			t.Fatalf("types %v", got)
		}
		if g.Status.Conditions[1].Reason != "X" {
			t.Fatalf("first B should be kept, got %+v", g.Status.Conditions[1])
		}
	})
	t.Run("unstructured round-trips the same values", func(t *testing.T) {
		u := uGizmo(7)
		mustSet(t, u, cond("Ready", metav1.ConditionTrue, "Done", "ü"), conditions.WithClock(clocktesting.NewFakePassiveClock(later)))
		raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		m := raw[0].(map[string]any)
		if m["lastTransitionTime"] != "2026-01-02T04:34:05Z" || m["observedGeneration"] != int64(7) || m["message"] != "ü" {
			t.Fatalf("stored %v", m)
		}
	})
}

func TestValidate(t *testing.T) {
	long := strings.Repeat("a", 1025)
	tests := []struct {
		name string
		c    metav1.Condition
		ok   bool
		want string
	}{
		{"valid", cond("Ready", "True", "Done", ""), true, ""},
		{"valid prefixed type", cond("example.com/DatabaseReady", "False", "A1:b,c_d", ""), true, ""},
		{"valid one-letter reason", cond("Ready", "Unknown", "X", ""), true, ""},
		{"empty type", cond("", "True", "Done", ""), false, "type: Required value"},
		{"type with space", cond("Not Valid", "True", "Done", ""), false, "type: Invalid value: \"Not Valid\""},
		{"type with two slashes", cond("a/b/c", "True", "Done", ""), false, "type"},
		{"type too long", cond(strings.Repeat("a", 64), "True", "Done", ""), false, "type"},
		{"status lower case", cond("Ready", "true", "Done", ""), false, "status: Unsupported value: \"true\""},
		{"status empty", cond("Ready", "", "Done", ""), false, "status"},
		{"reason empty", cond("Ready", "True", "", ""), false, "reason: Required value"},
		{"reason with space", cond("Ready", "True", "Not done", ""), false, "reason: Invalid value: \"Not done\""},
		{"reason starting with digit", cond("Ready", "True", "1Done", ""), false, "reason: Invalid value"},
		{"reason ending with colon", cond("Ready", "True", "Done:", ""), false, "reason: Invalid value"},
		{"reason too long", cond("Ready", "True", long, ""), false, "reason: Too long"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := conditions.Validate(tt.c)
			if (err == nil) != tt.ok {
				t.Fatalf("Validate = %v, want ok=%v", err, tt.ok)
			}
			if err != nil && (!errors.Is(err, conditions.ErrInvalidCondition) || !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("error %q does not wrap ErrInvalidCondition or mention %q", err, tt.want)
			}
			g := gizmo(1)
			g.Status.Conditions = []metav1.Condition{{Type: "Other", Status: "True", Reason: "Keep"}}
			before := g.DeepCopyObject()
			err = conditions.Set(g, tt.c)
			if (err == nil) != tt.ok {
				t.Fatalf("Set = %v, want ok=%v", err, tt.ok)
			}
			if err != nil && !equalObjects(before, g) {
				t.Fatal("an invalid Set changed the object")
			}
		})
	}
}

func equalObjects(a, b runtime.Object) bool {
	ua, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(a)
	ub, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(b)
	return fmt.Sprint(ua) == fmt.Sprint(ub)
}

func TestBoundMessage(t *testing.T) {
	const limit = conditions.MaxMessageLength
	tests := []struct {
		name      string
		in        string
		unchanged bool
	}{
		{"short", "hello", true},
		{"exactly the limit", strings.Repeat("a", limit), true},
		{"one byte over", strings.Repeat("a", limit+1), false},
		{"multi-byte runes straddling the cut", strings.Repeat("é", limit), false},
		{"4-byte runes", strings.Repeat("😀", limit/3), false},
		{"invalid UTF-8 that would grow when encoded", strings.Repeat("\xff", limit), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := conditions.BoundMessage(tt.in)
			if len(got) > limit || !utf8.ValidString(got) {
				t.Fatalf("len %d valid %v", len(got), utf8.ValidString(got))
			}
			if tt.unchanged != (got == tt.in) {
				t.Fatalf("unchanged = %v, want %v", got == tt.in, tt.unchanged)
			}
			if len(tt.in) > limit && !strings.HasSuffix(got, "[truncated]") {
				t.Fatalf("no truncation marker: ...%q", got[len(got)-20:])
			}
		})
	}
	g := gizmo(1)
	mustSet(t, g, cond("Ready", "False", "Big", strings.Repeat("x", 100000)))
	if len(g.Status.Conditions[0].Message) > limit {
		t.Fatal("Set did not bound the message")
	}
}

func TestOrder(t *testing.T) {
	want := []string{"Ready", "Reconciling", "Stalled", "Degraded", "Available", "DatabaseReady", "example.com/Zeta", "zeta"}
	for _, perm := range [][]int{{0, 1, 2, 3, 4, 5, 6, 7}, {7, 6, 5, 4, 3, 2, 1, 0}, {4, 0, 7, 2, 5, 1, 6, 3}} {
		g := gizmo(1)
		for _, i := range perm {
			mustSet(t, g, cond(want[i], "True", "X", ""))
		}
		if got := typeNames(g.Status.Conditions); !slices.Equal(got, want) {
			t.Fatalf("insertion order %v gave %v, want %v", perm, got, want)
		}
	}
	if conditions.Compare("Degraded", "Available") >= 0 || conditions.Compare("A", "B") >= 0 || conditions.Compare("Ready", "Ready") != 0 {
		t.Fatal("Compare disagrees with the documented order")
	}
}

func TestRemove(t *testing.T) {
	g := gizmo(1)
	mustSet(t, g, cond("Ready", "True", "X", ""))
	mustSet(t, g, cond("Stalled", "True", "X", ""))
	if err := conditions.Remove(g, "Missing"); err != nil || len(g.Status.Conditions) != 2 {
		t.Fatalf("removing a missing condition: %v %v", err, g.Status.Conditions)
	}
	if err := conditions.Remove(g, "Stalled"); err != nil || !slices.Equal(typeNames(g.Status.Conditions), []string{"Ready"}) {
		t.Fatalf("remove Stalled: %v %v", err, g.Status.Conditions)
	}
	if err := conditions.Remove(g, "Ready"); err != nil || g.Status.Conditions != nil {
		t.Fatalf("removing the last condition must leave nil: %v %#v", err, g.Status.Conditions)
	}
}

func TestPredicates(t *testing.T) {
	g := gizmo(1)
	mustSet(t, g, cond("T", "True", "X", ""))
	mustSet(t, g, cond("F", "False", "X", ""))
	mustSet(t, g, cond("U", "Unknown", "X", ""))
	tests := []struct {
		typ                    string
		isTrue, isFalse, isUnk bool
	}{
		{"T", true, false, false},
		{"F", false, true, false},
		{"U", false, false, true},
		{"Missing", false, false, true},
	}
	for _, tt := range tests {
		if conditions.IsTrue(g, tt.typ) != tt.isTrue || conditions.IsFalse(g, tt.typ) != tt.isFalse || conditions.IsUnknown(g, tt.typ) != tt.isUnk {
			t.Errorf("%s: IsTrue %v IsFalse %v IsUnknown %v", tt.typ, conditions.IsTrue(g, tt.typ), conditions.IsFalse(g, tt.typ), conditions.IsUnknown(g, tt.typ))
		}
	}
	c := conditions.Get(g, "T")
	c.Status = "False"
	if !conditions.IsTrue(g, "T") {
		t.Fatal("Get must return a copy")
	}
}

func TestIsStale(t *testing.T) {
	withCond := func(gen, og, condOG int64) *Gizmo {
		g := gizmo(gen)
		g.Status.ObservedGeneration = og
		if condOG >= 0 {
			g.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: "True", Reason: "X", ObservedGeneration: condOG}}
		}
		return g
	}
	u := uGizmo(3)
	_ = unstructured.SetNestedField(u.Object, int64(2), "status", "observedGeneration")
	uNoOG := uGizmo(3)
	mustSet(t, uNoOG, cond("Ready", "True", "X", ""))
	tests := []struct {
		name  string
		obj   client.Object
		stale bool
	}{
		{"all current", withCond(3, 3, 3), false},
		{"status.observedGeneration behind", withCond(3, 2, 3), true},
		{"a condition behind", withCond(3, 3, 2), true},
		{"condition without observedGeneration is not counted", withCond(3, 3, 0), false},
		{"never observed (typed status.observedGeneration 0)", withCond(1, 0, -1), true},
		{"unstructured status.observedGeneration behind", u, true},
		{"unstructured without status.observedGeneration, current condition", uNoOG, false},
		{"object without status", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Generation: 5}}, false},
	}
	for _, tt := range tests {
		if got := conditions.IsStale(tt.obj); got != tt.stale {
			t.Errorf("%s: IsStale = %v, want %v", tt.name, got, tt.stale)
		}
	}
	g := withCond(5, 1, 5)
	if err := conditions.SetObservedGeneration(g); err != nil || g.Status.ObservedGeneration != 5 || conditions.IsStale(g) {
		t.Fatalf("SetObservedGeneration: %v %d", err, g.Status.ObservedGeneration)
	}
}

func TestObservedGeneration(t *testing.T) {
	t.Run("typed", func(t *testing.T) {
		g := gizmo(4)
		if err := conditions.MarkReady(g, "Done", ""); err != nil || g.Status.ObservedGeneration != 4 {
			t.Fatalf("MarkReady did not record observedGeneration: %v %d", err, g.Status.ObservedGeneration)
		}
	})
	t.Run("accessor", func(t *testing.T) {
		c := &custom{ObjectMeta: metav1.ObjectMeta{Generation: 6}}
		if err := conditions.SetObservedGeneration(c); err != nil || c.State.Observed != 6 {
			t.Fatalf("%v %d", err, c.State.Observed)
		}
	})
	t.Run("type without the field", func(t *testing.T) {
		p := &pointerStatus{ObjectMeta: metav1.ObjectMeta{Generation: 2}}
		if err := conditions.SetObservedGeneration(p); err == nil {
			t.Fatal("want an error for a status without observedGeneration")
		}
		if err := conditions.MarkReady(p, "Done", ""); err != nil {
			t.Fatalf("MarkReady must not need observedGeneration: %v", err)
		}
	})
	t.Run("unstructured: implicit only when present, explicit always", func(t *testing.T) {
		u := uGizmo(3)
		if err := conditions.MarkReady(u, "Done", ""); err != nil {
			t.Fatal(err)
		}
		if _, found, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration"); found {
			t.Fatal("MarkReady added status.observedGeneration the schema may not have")
		}
		if err := conditions.SetObservedGeneration(u); err != nil {
			t.Fatal(err)
		}
		u.SetGeneration(4)
		if err := conditions.MarkReady(u, "Done", ""); err != nil {
			t.Fatal(err)
		}
		if og, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration"); og != 4 {
			t.Fatalf("observedGeneration %d, want 4", og)
		}
	})
}

type want struct {
	typ    string
	status metav1.ConditionStatus
	reason string
}

func check(t *testing.T, obj client.Object, wants []want) {
	t.Helper()
	cs := mustList(t, obj)
	if len(cs) != len(wants) {
		t.Fatalf("conditions %v, want %v", cs, wants)
	}
	for i, w := range wants {
		if cs[i].Type != w.typ || cs[i].Status != w.status || cs[i].Reason != w.reason {
			t.Fatalf("condition %d = %s=%s (%s), want %s=%s (%s)", i, cs[i].Type, cs[i].Status, cs[i].Reason, w.typ, w.status, w.reason)
		}
	}
}

func TestMarkHelpers(t *testing.T) {
	tests := []struct {
		name  string
		start []metav1.Condition
		mark  func(client.Object) error
		want  []want
	}{
		{"ready removes reconciling and stalled, keeps degraded",
			[]metav1.Condition{cond("Reconciling", "True", "X", ""), cond("Stalled", "True", "X", ""), cond("Degraded", "True", "D", "")},
			func(o client.Object) error { return conditions.MarkReady(o, "Done", "ok") },
			[]want{{"Ready", "True", "Done"}, {"Degraded", "True", "D"}}},
		{"reconciling on a new object sets Ready Unknown",
			nil,
			func(o client.Object) error { return conditions.MarkReconciling(o, "Progressing", "working") },
			[]want{{"Ready", "Unknown", "Progressing"}, {"Reconciling", "True", "Progressing"}}},
		{"reconciling keeps an existing Ready and removes Stalled",
			[]metav1.Condition{cond("Ready", "True", "Done", ""), cond("Stalled", "True", "X", "")},
			func(o client.Object) error { return conditions.MarkReconciling(o, "Progressing", "working") },
			[]want{{"Ready", "True", "Done"}, {"Reconciling", "True", "Progressing"}}},
		{"stalled sets Ready False and removes Reconciling",
			[]metav1.Condition{cond("Ready", "True", "Done", ""), cond("Reconciling", "True", "X", "")},
			func(o client.Object) error { return conditions.MarkStalled(o, "InvalidSpec", "bad") },
			[]want{{"Ready", "False", "InvalidSpec"}, {"Stalled", "True", "InvalidSpec"}}},
		{"invalid reason changes nothing",
			[]metav1.Condition{cond("Ready", "True", "Done", ""), cond("Reconciling", "True", "X", "")},
			func(o client.Object) error {
				if err := conditions.MarkStalled(o, "not valid", "bad"); !errors.Is(err, conditions.ErrInvalidCondition) {
					return fmt.Errorf("want ErrInvalidCondition, got %w", err)
				}
				return nil
			},
			[]want{{"Ready", "True", "Done"}, {"Reconciling", "True", "X"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := gizmo(1)
			for _, c := range tt.start {
				mustSet(t, g, c)
			}
			if err := tt.mark(g); err != nil {
				t.Fatal(err)
			}
			check(t, g, tt.want)
		})
	}
}

func TestApplyOutcome(t *testing.T) {
	gr := schema.GroupResource{Resource: "gizmos"}
	ready := []metav1.Condition{cond("Ready", "True", "Done", "")}
	tests := []struct {
		name  string
		start []metav1.Condition
		err   error
		want  []want
	}{
		{"success clears Stalled, Reconciling and the Ready=False the taxonomy set with them", []metav1.Condition{cond("Ready", "False", "Bad", ""), cond("Reconciling", "True", "X", ""), cond("Stalled", "True", "Bad", "")},
			nil, nil},
		{"success leaves a Ready the caller set", []metav1.Condition{cond("Ready", "False", "ReplicasUnavailable", "0 of 3"), cond("Stalled", "True", "Bad", "")},
			nil, []want{{"Ready", "False", "ReplicasUnavailable"}}},
		{"conflict touches nothing", []metav1.Condition{cond("Ready", "False", "Bad", ""), cond("Stalled", "True", "Bad", "")},
			apierrors.NewConflict(gr, "g", errors.New("modified")), []want{{"Ready", "False", "Bad"}, {"Stalled", "True", "Bad"}}},
		{"transient marks Reconciling with the error's reason", ready,
			apierrors.NewInternalError(errors.New("etcd")), []want{{"Ready", "True", "Done"}, {"Reconciling", "True", "InternalError"}}},
		{"transient on a new object", nil,
			errors.New("boom"), []want{{"Ready", "Unknown", "TransientError"}, {"Reconciling", "True", "TransientError"}}},
		{"dependency not ready marks Reconciling", ready,
			outcome.DependencyNotReady("DatabaseNotReady", "waiting", time.Second), []want{{"Ready", "True", "Done"}, {"Reconciling", "True", "DatabaseNotReady"}}},
		{"terminal marks Stalled and Ready False", append(slices.Clone(ready), cond("Reconciling", "True", "X", "")),
			outcome.Terminal("InvalidSpec", errors.New("bad")), []want{{"Ready", "False", "InvalidSpec"}, {"Stalled", "True", "InvalidSpec"}}},
		{"automatic terminal (422)", nil,
			apierrors.NewInvalid(schema.GroupKind{Kind: "Gizmo"}, "g", nil), []want{{"Ready", "False", "Invalid"}, {"Stalled", "True", "Invalid"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := gizmo(2)
			for _, c := range tt.start {
				mustSet(t, g, c)
			}
			g.SetGeneration(3)
			before := g.DeepCopyObject()
			if err := conditions.ApplyOutcome(g, tt.err); err != nil {
				t.Fatal(err)
			}
			check(t, g, tt.want)
			if outcome.Classify(tt.err).Class == outcome.ClassConflict {
				if !equalObjects(before, g) {
					t.Fatal("conflict changed the object")
				}
			} else if g.Status.ObservedGeneration != 3 {
				t.Fatalf("observedGeneration %d, want 3", g.Status.ObservedGeneration)
			}
		})
	}
	t.Run("terminal message is the error text", func(t *testing.T) {
		g := gizmo(1)
		if err := conditions.ApplyOutcome(g, fmt.Errorf("ns/g: %w", outcome.Terminal("InvalidSpec", errors.New("size must be <= 10")))); err != nil {
			t.Fatal(err)
		}
		if c := conditions.Get(g, conditions.Stalled); c == nil || c.Message != "size must be <= 10" {
			t.Fatalf("Stalled = %+v", c)
		}
	})
}

func TestSummarize(t *testing.T) {
	sub := func(cs ...metav1.Condition) *Gizmo {
		g := gizmo(5)
		for _, c := range cs {
			_ = conditions.Set(g, c)
		}
		return g
	}
	opts := []conditions.SummaryOption{conditions.WithPositive("Available", "DatabaseReady"), conditions.WithNegative(conditions.Degraded, conditions.Stalled)}
	tests := []struct {
		name   string
		obj    *Gizmo
		opts   []conditions.SummaryOption
		status metav1.ConditionStatus
		reason string
		msg    string
	}{
		{"all healthy, negatives missing", sub(cond("Available", "True", "A", ""), cond("DatabaseReady", "True", "B", "")), opts,
			"True", "Succeeded", ""},
		{"all healthy, negatives False", sub(cond("Available", "True", "A", ""), cond("DatabaseReady", "True", "B", ""), cond("Degraded", "False", "Fine", "")), opts,
			"True", "Succeeded", ""},
		{"the brief's example", sub(cond("Available", "True", "A", ""), cond("Degraded", "True", "ReplicasUnavailable", "1 of 3 replicas unavailable")), opts,
			"False", "ReplicasUnavailable", "Degraded: 1 of 3 replicas unavailable; DatabaseReady: Unknown (not yet reported)"},
		{"negative True beats everything", sub(cond("Available", "True", "A", ""), cond("DatabaseReady", "True", "B", ""), cond("Stalled", "True", "Stuck", "")), opts,
			"False", "Stuck", "Stalled: True (Stuck)"},
		{"positive False", sub(cond("Available", "False", "NoReplicas", "0 of 3"), cond("DatabaseReady", "True", "B", "")), opts,
			"False", "NoReplicas", "Available: 0 of 3"},
		{"first fault in standard order gives the reason", sub(cond("Available", "False", "NoReplicas", "0 of 3"), cond("Degraded", "True", "Partial", "p")), opts,
			"False", "Partial", "Degraded: p; Available: 0 of 3; DatabaseReady: Unknown (not yet reported)"},
		{"missing positive is Unknown", sub(cond("Available", "True", "A", "")), opts,
			"Unknown", "NotYetReported", "DatabaseReady: Unknown (not yet reported)"},
		{"Unknown negative is Unknown", sub(cond("Available", "True", "A", ""), cond("DatabaseReady", "True", "B", ""), cond("Degraded", "Unknown", "Checking", "checking")), opts,
			"Unknown", "Checking", "Degraded: checking"},
		{"custom target and true reason", sub(cond("Available", "True", "A", "")), []conditions.SummaryOption{conditions.WithPositive("Available"), conditions.WithTrueReason("AllGood")},
			"True", "AllGood", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := conditions.Ready
			if tt.name == "custom target and true reason" {
				target = "Healthy"
			}
			c, err := conditions.Summarize(tt.obj, target, tt.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if c.Status != tt.status || c.Reason != tt.reason || c.Message != tt.msg || c.ObservedGeneration != 5 {
				t.Fatalf("got %s (%s) %q og=%d\nwant %s (%s) %q", c.Status, c.Reason, c.Message, c.ObservedGeneration, tt.status, tt.reason, tt.msg)
			}
			if err := conditions.Validate(c); err != nil {
				t.Fatal(err)
			}
			if err := conditions.SetSummary(tt.obj, target, tt.opts...); err != nil {
				t.Fatal(err)
			}
			if got := conditions.Get(tt.obj, target); got == nil || got.Status != tt.status {
				t.Fatalf("SetSummary wrote %+v", got)
			}
		})
	}
	errCases := []struct {
		name string
		opts []conditions.SummaryOption
	}{
		{"no sub-conditions", nil},
		{"target is a sub-condition", []conditions.SummaryOption{conditions.WithPositive("Ready")}},
		{"both polarities", []conditions.SummaryOption{conditions.WithPositive("X"), conditions.WithNegative("X")}},
	}
	for _, tt := range errCases {
		if _, err := conditions.Summarize(gizmo(1), conditions.Ready, tt.opts...); err == nil {
			t.Errorf("%s: want an error", tt.name)
		}
	}
	if _, err := conditions.Summarize(&corev1.ConfigMap{}, conditions.Ready, conditions.WithPositive("A")); !errors.Is(err, conditions.ErrNoConditions) {
		t.Errorf("summary of an object without conditions: %v", err)
	}
}

func TestMirror(t *testing.T) {
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Generation: 1}}
	deploy.Status.Conditions = []appsv1.DeploymentCondition{
		{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse, Reason: "MinimumReplicasUnavailable", Message: "Deployment does not have minimum availability."},
		{Type: appsv1.DeploymentProgressing, Status: "Maybe", Reason: "with spaces", Message: "odd"},
	}
	uDeploy := &unstructured.Unstructured{}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(deploy)
	if err != nil {
		t.Fatal(err)
	}
	uDeploy.Object = content
	child := gizmo(9)
	mustSet(t, child, cond("Ready", "True", "Done", "child ready"))
	tests := []struct {
		name      string
		child     client.Object
		childType string
		opts      []conditions.MirrorOption
		want      metav1.Condition
	}{
		{"typed Deployment Available", deploy, "Available", nil,
			cond("WebAvailable", "False", "MinimumReplicasUnavailable", "Deployment does not have minimum availability.")},
		{"unstructured Deployment Available", uDeploy, "Available", nil,
			cond("WebAvailable", "False", "MinimumReplicasUnavailable", "Deployment does not have minimum availability.")},
		{"invalid status and reason are repaired", deploy, "Progressing", nil,
			cond("WebAvailable", "Unknown", "WithSpaces", "odd")},
		{"metav1 child", child, "Ready", nil,
			cond("WebAvailable", "True", "Done", "child ready")},
		{"unreported: default default", deploy, "ReplicaFailure", nil,
			cond("WebAvailable", "Unknown", "NotYetReported", "Deployment ns/web has not reported ReplicaFailure")},
		{"unreported: WithDefault", &appsv1.Deployment{}, "Available", []conditions.MirrorOption{conditions.WithDefault("False", "Pending", "not yet")},
			cond("WebAvailable", "False", "Pending", "not yet")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent := gizmo(4)
			if err := conditions.Mirror(parent, tt.child, tt.childType, "WebAvailable", tt.opts...); err != nil {
				t.Fatal(err)
			}
			got := *conditions.Get(parent, "WebAvailable")
			if got.Status != tt.want.Status || got.Reason != tt.want.Reason || got.Message != tt.want.Message || got.ObservedGeneration != 4 {
				t.Fatalf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
	if err := conditions.Mirror(gizmo(1), &corev1.ConfigMap{}, "Ready", "X"); !errors.Is(err, conditions.ErrNoConditions) {
		t.Fatalf("mirror from an object without conditions: %v", err)
	}
}

func TestStatusPatcherChanged(t *testing.T) {
	g := gizmo(1)
	g.ResourceVersion = "7"
	mustSet(t, g, cond("Ready", "True", "Done", ""))
	for _, tt := range []struct {
		name    string
		mutate  func(*Gizmo)
		changed bool
	}{
		{"nothing", func(*Gizmo) {}, false},
		{"same condition set again", func(g *Gizmo) { mustSet(t, g, cond("Ready", "True", "Done", "")) }, false},
		{"spec and metadata only", func(g *Gizmo) { g.Spec.Size = 3; g.Labels = map[string]string{"a": "b"} }, false},
		{"message", func(g *Gizmo) { mustSet(t, g, cond("Ready", "True", "Done", "new")) }, true},
		{"observedGeneration", func(g *Gizmo) { g.Status.ObservedGeneration = 1 }, true},
		{"condition removed", func(g *Gizmo) { _ = conditions.Remove(g, "Ready") }, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			obj := g.DeepCopyObject().(*Gizmo)
			p := conditions.NewStatusPatcher(obj)
			tt.mutate(obj)
			changed, err := p.Changed(obj)
			if err != nil || changed != tt.changed {
				t.Fatalf("Changed = %v, %v; want %v", changed, err, tt.changed)
			}
		})
	}
}

// TestStatusPatcherLayouts: the patch of a typed object (its status converted
// on its own) is the merge patch of the whole objects' JSON status, for a
// status held by value and one behind a pointer (nil before, then set).
func TestStatusPatcherLayouts(t *testing.T) {
	wholeStatusPatch := func(before, after client.Object) string {
		t.Helper()
		status := func(o client.Object) map[string]any {
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
			if err != nil {
				t.Fatal(err)
			}
			return map[string]any{"status": m["status"]}
		}
		data, err := client.MergeFrom(&unstructured.Unstructured{Object: status(before)}).Data(&unstructured.Unstructured{Object: status(after)})
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	t.Run("value", func(t *testing.T) {
		g := gizmo(2)
		mustSet(t, g, cond("Ready", "False", "Waiting", "x"))
		before := g.DeepCopyObject().(*Gizmo)
		p := conditions.NewStatusPatcher(before.DeepCopyObject().(*Gizmo))
		mustSet(t, g, cond("Ready", "True", "Done", ""))
		g.Status.ObservedGeneration = 2
		c := &capture{}
		if sent, err := p.Patch(t.Context(), c.client(t), g); err != nil || !sent {
			t.Fatalf("Patch = %v, %v; want sent", sent, err)
		}
		if want := wholeStatusPatch(before, g); c.body != want {
			t.Fatalf("patch\n%s\nwant\n%s", c.body, want)
		}
	})
	t.Run("pointer", func(t *testing.T) {
		ps := &pointerStatus{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 2}}
		before := ps.DeepCopyObject().(*pointerStatus)
		p := conditions.NewStatusPatcher(before.DeepCopyObject().(*pointerStatus))
		if changed, err := p.Changed(ps); err != nil || changed {
			t.Fatalf("Changed before any Set = %v, %v", changed, err)
		}
		mustSet(t, ps, cond("Ready", "True", "Done", ""))
		c := &capture{}
		if sent, err := p.Patch(t.Context(), c.client(t), ps); err != nil || !sent {
			t.Fatalf("Patch = %v, %v; want sent", sent, err)
		}
		if want := wholeStatusPatch(before, ps); c.body != want {
			t.Fatalf("patch\n%s\nwant\n%s", c.body, want)
		}
	})
}

// capture is a client whose status patches are recorded, not sent.
type capture struct{ body string }

func (c *capture) client(t *testing.T) client.Client {
	t.Helper()
	return fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		SubResourcePatch: func(_ context.Context, _ client.Client, sub string, obj client.Object, patch client.Patch, _ ...client.SubResourcePatchOption) error {
			if sub != "status" {
				t.Fatalf("patch of subresource %q", sub)
			}
			data, err := patch.Data(obj)
			c.body = string(data)
			return err
		},
	}).Build()
}
