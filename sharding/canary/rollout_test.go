package canary_test

import (
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/opkit/opkit/sharding/canary"
)

// TestBadCanaryRolledBack: a canary version that stalls every Widget it
// reconciles joins with weight 0, gets its first share, is judged worse than
// the stable version and rolled back: every Widget returns to the stable
// members through the drain hand-over, Ready again, its one child (the same
// object, never re-created) back in the stable version's shape; no Widget
// was ever inside two versions' reconciles at once.
func TestBadCanaryRolledBack(t *testing.T) {
	f := newFleet(t, "bad", canary.WithSteps(25, 50, 100), canary.WithWindow(3*time.Second), canary.WithInterval(200*time.Millisecond))
	f.start("stable-0", "v1", v1, nil)
	f.start("stable-1", "v1", v1, nil)
	f.createWidgets(40)
	eventually(t, time.Minute, "Widgets Ready on v1", func() (bool, string) { return f.all([]string{"stable-0", "stable-1"}, "v1") })
	before, err := f.read()
	if err != nil {
		t.Fatal(err)
	}
	if st := f.state(); st.Phase != canary.PhaseIdle || st.StableVersion != "v1" {
		t.Fatalf("before the canary: phase %s stable %q, want Idle v1", st.Phase, st.StableVersion)
	}

	start := time.Now()
	f.start("canary-0", "v2", v2Bad, ptr.To(0))
	f.waitPhase(time.Minute, canary.PhaseRollingBack, nil)
	verdict := time.Since(start)
	st := f.state()
	if st.Verdict != canary.Fail || st.Percent != 0 || st.CanaryVersion != "v2" {
		t.Fatalf("rolling back with verdict %q at %d%% for %q: %s", st.Verdict, st.Percent, st.CanaryVersion, st.Message)
	}
	if got := gauge(t, f.reg, "opkit_canary_decisions_total", map[string]string{"ring": "bad", "decision": "fail"}); got != 1 {
		t.Errorf("opkit_canary_decisions_total{decision=fail} = %v, want 1", got)
	}
	f.waitPhase(time.Minute, canary.PhaseRolledBack, nil)
	rolledBack := time.Since(start) - verdict
	eventually(t, time.Minute, "every Widget back on v1, Ready, children in v1's shape",
		func() (bool, string) { return f.all([]string{"stable-0", "stable-1"}, "v1") })
	t.Logf("verdict %s after the canary started; rolled back %s later; %s", verdict.Round(time.Millisecond), rolledBack.Round(time.Millisecond), f.state().Message)

	after, err := f.read()
	if err != nil {
		t.Fatal(err)
	}
	if after.children != len(before.owner) {
		t.Errorf("%d children for %d Widgets", after.children, len(before.owner))
	}
	for name, uid := range before.childUID {
		if after.childUID[name] != uid {
			t.Errorf("%s's child was re-created (uid %s → %s)", name, uid, after.childUID[name])
		}
	}
	if got := gauge(t, f.reg, "opkit_canary_phase", map[string]string{"ring": "bad", "phase": "RolledBack"}); got != 1 {
		t.Errorf("opkit_canary_phase{phase=RolledBack} = %v, want 1", got)
	}
	// The canary had a share: some Widgets were stalled by it and restored.
	if n := gauge(t, f.reg, "opkit_canary_objects", map[string]string{"ring": "bad", "cohort": "canary"}); n != 0 {
		t.Errorf("opkit_canary_objects{cohort=canary} = %v after the roll back", n)
	}
	out, err := f.kubectl("get", "configmap", canary.StateName("bad"), "-o", "jsonpath={.data.phase} {.data.canaryVersion} {.data.verdict}")
	if err != nil || out != "RolledBack v2 Fail" {
		t.Errorf("kubectl shows %q (%v), want \"RolledBack v2 Fail\"", out, err)
	}
	if max, key := f.overlap.Max(); max != 1 {
		t.Errorf("Widget %s was inside %d reconciles at once", key, max)
	}
}
