package canary_test

import (
	"os"
	"strconv"
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
	f.createWidgets(widgetCount(t))
	eventually(t, 5*time.Minute, "Widgets Ready on v1", func() (bool, string) { return f.all([]string{"stable-0", "stable-1"}, "v1") })
	before, err := f.read()
	if err != nil {
		t.Fatal(err)
	}
	if st := f.state(); st.Phase != canary.PhaseIdle || st.StableVersion != "v1" {
		t.Fatalf("before the canary: phase %s stable %q, want Idle v1", st.Phase, st.StableVersion)
	}

	start := time.Now()
	f.start("canary-0", "v2", v2Bad, ptr.To(0))
	f.waitPhase(5*time.Minute, canary.PhaseRollingBack, nil)
	verdict := time.Since(start)
	st := f.state()
	if st.Verdict != canary.Fail || st.Percent != 0 || st.CanaryVersion != "v2" {
		t.Fatalf("rolling back with verdict %q at %d%% for %q: %s", st.Verdict, st.Percent, st.CanaryVersion, st.Message)
	}
	// Every Widget v2 reconciled failed, most of them while its first step
	// settled (the Widgets moving to it), before the window began: those
	// errors are the step's and are reported with the verdict.
	if st.Canary.Errors == 0 {
		t.Errorf("rolling back with no reconcile errors reported for v2: %s", st.Message)
	}
	if got := gauge(t, f.reg, "opkit_canary_decisions_total", map[string]string{"ring": "bad", "decision": "fail"}); got != 1 {
		t.Errorf("opkit_canary_decisions_total{decision=fail} = %v, want 1", got)
	}
	f.waitPhase(5*time.Minute, canary.PhaseRolledBack, nil)
	rolledBack := time.Since(start) - verdict
	eventually(t, 5*time.Minute, "every Widget back on v1, Ready, children in v1's shape",
		func() (bool, string) { return f.all([]string{"stable-0", "stable-1"}, "v1") })
	t.Logf("%d Widgets: verdict %s after the canary started; rolled back %s later; %s", len(before.owner), verdict.Round(time.Millisecond), rolledBack.Round(time.Millisecond), f.state().Message)

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

// TestGoodCanaryPromoted: a canary no worse than the stable version widens
// through every step and is promoted: every Widget on the canary member, its
// child in the canary's shape (the same object), v2 the stable version, and
// no Widget inside two versions' reconciles at once on the way.
func TestGoodCanaryPromoted(t *testing.T) {
	f := newFleet(t, "good", canary.WithSteps(25, 50), canary.WithWindow(2*time.Second), canary.WithInterval(200*time.Millisecond))
	f.start("stable-0", "v1", v1, nil)
	f.start("stable-1", "v1", v1, nil)
	f.createWidgets(40)
	eventually(t, time.Minute, "Widgets Ready on v1", func() (bool, string) { return f.all([]string{"stable-0", "stable-1"}, "v1") })
	before, err := f.read()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	f.start("canary-0", "v2", v2Good, ptr.To(0))
	seen := map[int]bool{}
	f.waitPhase(2*time.Minute, canary.PhasePromoted, seen)
	took := time.Since(start)
	for _, p := range []int{25, 50, 100} {
		if !seen[p] {
			t.Errorf("the rollout never showed step %d%% (saw %v)", p, seen)
		}
	}
	st := f.state()
	if st.StableVersion != "v2" || st.PreviousVersion != "v1" || st.CanaryVersion != "" || st.Percent != 100 {
		t.Fatalf("promoted state: stable %q previous %q canary %q at %d%%", st.StableVersion, st.PreviousVersion, st.CanaryVersion, st.Percent)
	}
	eventually(t, time.Minute, "every Widget on v2, Ready, children in v2's shape",
		func() (bool, string) { return f.all([]string{"canary-0"}, "v2") })
	t.Logf("promoted %s after the canary started: %s", took.Round(time.Millisecond), st.Message)
	after, err := f.read()
	if err != nil {
		t.Fatal(err)
	}
	for name, uid := range before.childUID {
		if after.childUID[name] != uid {
			t.Errorf("%s's child was re-created (uid %s → %s)", name, uid, after.childUID[name])
		}
	}
	if after.children != len(before.owner) {
		t.Errorf("%d children for %d Widgets", after.children, len(before.owner))
	}
	if got := gauge(t, f.reg, "opkit_canary_decisions_total", map[string]string{"ring": "good", "decision": "pass"}); got != 3 {
		t.Errorf("opkit_canary_decisions_total{decision=pass} = %v, want 3 (25, 50, 100)", got)
	}
	if max, key := f.overlap.Max(); max != 1 {
		t.Errorf("Widget %s was inside %d reconciles at once", key, max)
	}
}

// TestActions: a person steers with one annotation each: pause holds the
// share and stops the judging (a pass would otherwise come after the
// window), resume continues, abort rolls back; a later version starts a new
// rollout, which promote finishes at once. Actions that do not apply are
// recorded as ignored.
func TestActions(t *testing.T) {
	f := newFleet(t, "actions", canary.WithSteps(50), canary.WithWindow(time.Hour), canary.WithInterval(200*time.Millisecond))
	f.start("stable-0", "v1", v1, nil)
	f.createWidgets(20)
	eventually(t, time.Minute, "Widgets Ready on v1", func() (bool, string) { return f.all([]string{"stable-0"}, "v1") })
	f.annotate(canary.ActionAbort)
	eventually(t, 30*time.Second, "ignored abort", func() (bool, string) {
		st := f.state()
		return st.LastAction == "abort (ignored in phase Idle)", "lastAction " + st.LastAction
	})

	f.start("canary-0", "v2", v2Good, ptr.To(0))
	eventually(t, time.Minute, "canary at 50% with its window started", func() (bool, string) {
		st := f.state()
		return st.Phase == canary.PhaseProgressing && !st.WindowStart.IsZero() && st.Canary.Objects > 0,
			string(st.Phase) + ": " + st.Message
	})
	f.annotate(canary.ActionPause)
	f.waitPhase(30*time.Second, canary.PhasePaused, nil)
	held := f.state()
	if held.Percent != 50 || held.LastAction != canary.ActionPause {
		t.Fatalf("paused at %d%% (last action %q)", held.Percent, held.LastAction)
	}
	f.annotate(canary.ActionResume)
	f.waitPhase(30*time.Second, canary.PhaseProgressing, nil)
	f.annotate(canary.ActionAbort)
	f.waitPhase(time.Minute, canary.PhaseRolledBack, nil)
	eventually(t, time.Minute, "every Widget back on v1", func() (bool, string) { return f.all([]string{"stable-0"}, "v1") })
	if st := f.state(); st.LastAction != canary.ActionAbort || st.CanaryVersion != "v2" {
		t.Fatalf("after abort: last action %q canary %q", st.LastAction, st.CanaryVersion)
	}

	// v2 stays rolled back; v3 is a new rollout.
	f.start("canary-1", "v3", v2Good, ptr.To(0))
	eventually(t, time.Minute, "rollout of v3", func() (bool, string) {
		st := f.state()
		return st.Phase == canary.PhaseProgressing && st.CanaryVersion == "v3", string(st.Phase) + " " + st.CanaryVersion
	})
	f.annotate(canary.ActionPromote)
	f.waitPhase(time.Minute, canary.PhasePromoted, nil)
	eventually(t, time.Minute, "every Widget on v3", func() (bool, string) { return f.all([]string{"canary-1"}, "v2") })
	st := f.state()
	if st.StableVersion != "v3" || st.LastAction != canary.ActionPromote {
		t.Fatalf("after promote: stable %q last action %q", st.StableVersion, st.LastAction)
	}
	for _, a := range []string{"pause", "resume", "abort", "promote"} {
		if got := gauge(t, f.reg, "opkit_canary_decisions_total", map[string]string{"ring": "actions", "decision": a}); got != 1 {
			t.Errorf("opkit_canary_decisions_total{decision=%s} = %v, want 1", a, got)
		}
	}
	if max, key := f.overlap.Max(); max != 1 {
		t.Errorf("Widget %s was inside %d reconciles at once", key, max)
	}
}

// widgetCount is 40, or OPKIT_CANARY_OBJECTS (e.g. 1000) for the figures.
func widgetCount(t testing.TB) int {
	if s := os.Getenv("OPKIT_CANARY_OBJECTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("OPKIT_CANARY_OBJECTS: %v", err)
		}
		return n
	}
	return 40
}
