package conditions_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/opkit/opkit/conditions"
)

var fuzzTypes = []string{"Ready", "Reconciling", "Stalled", "Degraded", "Available", "DatabaseReady", "example.com/Z", "a"}
var fuzzStatuses = []metav1.ConditionStatus{"True", "False", "Unknown"}

// FuzzSetIdempotent: setting the same condition twice (even later) leaves the
// object exactly as after the first time, whatever was there before.
func FuzzSetIdempotent(f *testing.F) {
	f.Add(uint8(0), uint8(0), "Done", "msg", int64(1), uint64(1))
	f.Add(uint8(3), uint8(2), "A:b", strings.Repeat("é", 20000), int64(7), uint64(42))
	f.Add(uint8(6), uint8(1), "X", "\xff\xfe", int64(0), uint64(7))
	f.Fuzz(func(t *testing.T, ti, si uint8, reason, msg string, gen int64, seed uint64) {
		c := metav1.Condition{Type: fuzzTypes[int(ti)%len(fuzzTypes)], Status: fuzzStatuses[int(si)%3], Reason: reason, Message: msg}
		g := gizmo(gen)
		g.Status.Conditions = randomConditions(seed)
		clk := clocktesting.NewFakeClock(t0)
		if err := conditions.Set(g, c, conditions.WithClock(clk)); err != nil {
			if conditions.Validate(c) == nil {
				t.Fatalf("valid condition rejected: %v", err)
			}
			return
		}
		first := g.DeepCopyObject().(*Gizmo)
		clk.Step(time.Hour)
		if err := conditions.Set(g, c, conditions.WithClock(clk)); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(first.Status, g.Status) {
			t.Fatalf("second Set changed the object:\n%+v\n%+v", first.Status, g.Status)
		}
		got := conditions.Get(g, c.Type)
		if got.ObservedGeneration != gen || len(got.Message) > conditions.MaxMessageLength {
			t.Fatalf("stored %+v", got)
		}
	})
}

func randomConditions(seed uint64) []metav1.Condition {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var out []metav1.Condition
	for _, ty := range fuzzTypes {
		if r.IntN(2) == 0 {
			out = append(out, metav1.Condition{Type: ty, Status: fuzzStatuses[r.IntN(3)], Reason: "R", ObservedGeneration: r.Int64N(5),
				LastTransitionTime: metav1.NewTime(t0.Add(-time.Duration(r.IntN(1000)) * time.Second))})
		}
	}
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// FuzzLastTransitionTime: over any sequence of Sets, lastTransitionTime moves
// exactly when the status changes, whatever reason, message and generation do.
func FuzzLastTransitionTime(f *testing.F) {
	f.Add([]byte{0, 0, 1, 1, 2, 0})
	f.Add([]byte{5, 4, 3, 3, 3, 9, 200})
	f.Fuzz(func(t *testing.T, seq []byte) {
		g := gizmo(1)
		clk := clocktesting.NewFakeClock(t0)
		var prev *metav1.Condition
		for i, b := range seq {
			clk.Step(time.Second)
			g.SetGeneration(int64(1 + i/2))
			c := metav1.Condition{Type: "Ready", Status: fuzzStatuses[int(b)%3], Reason: fmt.Sprintf("R%d", b>>2), Message: fmt.Sprint(i)}
			if err := conditions.Set(g, c, conditions.WithClock(clk)); err != nil {
				t.Fatal(err)
			}
			cur := conditions.Get(g, "Ready")
			moved := prev == nil || !cur.LastTransitionTime.Equal(&prev.LastTransitionTime)
			changed := prev == nil || prev.Status != cur.Status
			if moved != changed {
				t.Fatalf("step %d: status %s→%s but lastTransitionTime moved=%v", i, statusOrNone(prev), cur.Status, moved)
			}
			if changed && !cur.LastTransitionTime.Time.Equal(clk.Now()) {
				t.Fatalf("step %d: lastTransitionTime %v, want now %v", i, cur.LastTransitionTime, clk.Now())
			}
			prev = cur
		}
	})
}

func statusOrNone(c *metav1.Condition) string {
	if c == nil {
		return "none"
	}
	return string(c.Status)
}

// FuzzOrderDeterministic: the stored order depends only on which types are
// present, not on the order they were set in or what was there before.
func FuzzOrderDeterministic(f *testing.F) {
	f.Add(uint64(1), uint64(2))
	f.Add(uint64(99), uint64(3))
	f.Fuzz(func(t *testing.T, seedA, seedB uint64) {
		ra := rand.New(rand.NewPCG(seedA, 1))
		rb := rand.New(rand.NewPCG(seedB, 2))
		a, b := gizmo(1), gizmo(1)
		for _, i := range ra.Perm(len(fuzzTypes)) {
			_ = conditions.Set(a, metav1.Condition{Type: fuzzTypes[i], Status: "True", Reason: "R"})
		}
		b.Status.Conditions = randomConditions(seedB)
		for _, i := range rb.Perm(len(fuzzTypes)) {
			_ = conditions.Set(b, metav1.Condition{Type: fuzzTypes[i], Status: "False", Reason: "S"})
		}
		ta, tb := typeNames(a.Status.Conditions), typeNames(b.Status.Conditions)
		if !slices.Equal(ta, tb) {
			t.Fatalf("orders differ: %v vs %v", ta, tb)
		}
		if !slices.IsSortedFunc(ta, conditions.Compare) {
			t.Fatalf("not sorted by Compare: %v", ta)
		}
		if ta[0] != "Ready" || ta[1] != "Reconciling" || ta[2] != "Stalled" || ta[3] != "Degraded" {
			t.Fatalf("standard types not first: %v", ta)
		}
	})
}

// FuzzSummary: Summarize's result follows its documented rules for every
// combination of sub-condition states (missing, True, False, Unknown).
func FuzzSummary(f *testing.F) {
	f.Add(uint16(0))
	f.Add(uint16(0x1ff))
	f.Add(uint16(1234))
	positive := []string{"Available", "DatabaseReady", "example.com/Z"}
	negative := []string{"Degraded", "Stalled"}
	f.Fuzz(func(t *testing.T, bits uint16) {
		g := gizmo(3)
		state := map[string]int{} // 0 missing, 1 True, 2 False, 3 Unknown
		for i, ty := range append(slices.Clone(positive), negative...) {
			s := int(bits>>(2*i)) & 3
			state[ty] = s
			if s > 0 {
				if err := conditions.Set(g, metav1.Condition{Type: ty, Status: fuzzStatuses[s-1], Reason: "R" + fmt.Sprint(i), Message: "m" + fmt.Sprint(i)}); err != nil {
					t.Fatal(err)
				}
			}
		}
		c, err := conditions.Summarize(g, conditions.Ready, conditions.WithPositive(positive...), conditions.WithNegative(negative...))
		if err != nil {
			t.Fatal(err)
		}
		var faults, unknowns []string
		for _, ty := range positive {
			switch state[ty] {
			case 2:
				faults = append(faults, ty)
			case 0, 3:
				unknowns = append(unknowns, ty)
			}
		}
		for _, ty := range negative {
			switch state[ty] {
			case 1:
				faults = append(faults, ty)
			case 3:
				unknowns = append(unknowns, ty)
			}
		}
		want := metav1.ConditionTrue
		switch {
		case len(faults) > 0:
			want = metav1.ConditionFalse
		case len(unknowns) > 0:
			want = metav1.ConditionUnknown
		}
		if c.Status != want {
			t.Fatalf("states %v: status %s, want %s", state, c.Status, want)
		}
		for _, ty := range append(faults, unknowns...) {
			if !strings.Contains(c.Message, ty+": ") {
				t.Fatalf("message %q does not name %s", c.Message, ty)
			}
		}
		if (c.Message == "") != (want == metav1.ConditionTrue) {
			t.Fatalf("message %q for status %s", c.Message, want)
		}
		if err := conditions.Validate(c); err != nil {
			t.Fatal(err)
		}
	})
}
