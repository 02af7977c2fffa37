package sharding

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

func lease(member, holder, rv string, renew time.Time) *coordinationv1.Lease {
	var h *string
	if holder != "" {
		h = ptr.To(holder)
	}
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: LeaseName("r", member), ResourceVersion: rv,
			Labels: map[string]string{RingLabel: "r", MemberLabel: member}},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       h,
			LeaseDurationSeconds: ptr.To(int32(10)),
			RenewTime:            &metav1.MicroTime{Time: renew},
		},
	}
}

func TestMembershipTransitions(t *testing.T) {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	m := NewMembership(WithClock(clk))
	want := func(member string, s MemberState) {
		t.Helper()
		if got := m.State(member); got != s {
			t.Fatalf("at +%s %s is %s, want %s", clk.Since(start), member, got, s)
		}
	}
	if !m.Observe(lease("a", "a-1", "0", start)) {
		t.Fatal("first observation must report a change")
	}
	// Seen once: it may be a long-dead member's Lease, so not on the ring yet.
	want("a", StateExpired)
	if !m.Observe(lease("a", "a-1", "1", start)) {
		t.Fatal("the first renewal seen must report a change")
	}
	want("a", StateReady)
	want("unknown", StateDead)

	clk.Step(10 * time.Second) // exactly one duration: still ready
	want("a", StateReady)
	if d := m.NextTransition(); d != time.Millisecond {
		t.Fatalf("next transition in %s, want 1ms", d)
	}
	clk.Step(time.Millisecond)
	want("a", StateExpired)
	if got := m.Ready(); len(got) != 0 {
		t.Fatalf("expired member on the ring: %v", got)
	}

	// The same resourceVersion again (a relist) is not a renewal.
	if m.Observe(lease("a", "a-1", "1", start)) {
		t.Fatal("unchanged lease reported a change")
	}
	want("a", StateExpired)

	clk.Step(10 * time.Second) // two durations: dead
	want("a", StateDead)

	// A renewal revives it.
	if !m.Observe(lease("a", "a-1", "2", start)) {
		t.Fatal("renewal of a dead member must report a change")
	}
	want("a", StateReady)

	// Release: dead at once.
	m.Observe(lease("a", "", "3", start))
	want("a", StateDead)
	if d := m.NextTransition(); d != 0 {
		t.Fatalf("released member has a next transition: %s", d)
	}

	m.Observe(lease("b", "b-1", "1", start))
	m.Forget("b")
	want("b", StateDead)
}

// TestMembershipIgnoresRemoteClocks: a member whose clock is far ahead or far
// behind is judged only by when its Lease last changed here.
func TestMembershipIgnoresRemoteClocks(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(now)
	m := NewMembership(WithClock(clk))
	for _, rv := range []string{"0", "1"} { // seen, then seen renewing
		m.Observe(lease("behind", "x", rv, now.Add(-time.Hour))) // renewTime an hour in the past
		m.Observe(lease("ahead", "y", rv, now.Add(time.Hour)))   // an hour in the future
	}
	for _, s := range []string{"behind", "ahead"} {
		if got := m.State(s); got != StateReady {
			t.Fatalf("%s is %s right after a change, want ready", s, got)
		}
	}
	clk.Step(25 * time.Second)
	m.Observe(lease("ahead", "y", "1", now.Add(time.Hour))) // no change
	for _, s := range []string{"behind", "ahead"} {
		if got := m.State(s); got != StateDead {
			t.Fatalf("%s is %s after 25s without change, want dead", s, got)
		}
	}
}

func TestMembershipDeadGraceAndWithoutResourceVersion(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(now)
	m := NewMembership(WithClock(clk), WithDeadGrace(func(d time.Duration) time.Duration { return 3 * d }))
	m.Observe(lease("a", "h", "", now))
	clk.Step(30 * time.Second)
	if got := m.State("a"); got != StateExpired {
		t.Fatalf("got %s, want expired with a 3x grace", got)
	}
	// Without a resourceVersion the renewTime is the renewal counter.
	m.Observe(lease("a", "h", "", now.Add(time.Second)))
	if got := m.State("a"); got != StateReady {
		t.Fatalf("got %s after renewTime changed, want ready", got)
	}
}

// TestMembershipWeightIsNotARenewal: a Lease whose only change is its weight
// or version annotation (a canary controller steering the ring) is not seen
// as renewed, so a dead member stays dead; the weight change is reported.
func TestMembershipWeightIsNotARenewal(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(now)
	m := NewMembership(WithClock(clk))
	m.Observe(lease("a", "h", "1", now))
	m.Observe(lease("a", "h", "2", now.Add(time.Second)))
	if got, w := m.State("a"), m.Weight("a"); got != StateReady || w != DefaultWeight {
		t.Fatalf("got %s weight %d, want ready weight %d", got, w, DefaultWeight)
	}
	clk.Step(25 * time.Second)
	if got := m.State("a"); got != StateDead {
		t.Fatalf("got %s after two durations, want dead", got)
	}
	steered := lease("a", "h", "3", now.Add(time.Second))
	steered.Annotations = map[string]string{WeightAnnotation: "10", VersionAnnotation: "v2"}
	if !m.Observe(steered) {
		t.Fatal("a weight change must be reported")
	}
	if got, w, v := m.State("a"), m.Weight("a"), m.Version("a"); got != StateDead || w != 10 || v != "v2" {
		t.Fatalf("after a weight-only change: %s weight %d version %q, want dead, 10, v2", got, w, v)
	}
	// A real renewal (renewTime changes) revives it and keeps the weight.
	renewed := lease("a", "h", "4", now.Add(2*time.Second))
	renewed.Annotations = steered.Annotations
	m.Observe(renewed)
	if got, w := m.State("a"), m.Weights()["a"]; got != StateReady || w != 10 {
		t.Fatalf("after a renewal: %s weight %d, want ready 10", got, w)
	}
	bad := lease("a", "h", "5", now.Add(3*time.Second))
	bad.Annotations = map[string]string{WeightAnnotation: "x"}
	if m.Observe(bad); m.Weight("a") != DefaultWeight {
		t.Fatalf("unparsable weight read as %d, want %d", m.Weight("a"), DefaultWeight)
	}
	if m.Weight("nobody") != 0 || m.Version("nobody") != "" {
		t.Fatal("unknown member has a weight or version")
	}
}
