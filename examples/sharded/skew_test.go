package main

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/examples/internal/e2etest"
	"github.com/opkit/opkit/examples/sharded/fleet"
	webappv1 "github.com/opkit/opkit/examples/webapp/api/v1"
)

// skewed is a wall clock offset by a fixed duration: a machine whose clock
// is that far ahead (or behind, when negative). Timers and tickers run at
// the real rate, as on such a machine; Now and Since are shifted.
type skewed struct {
	clock.RealClock
	offset time.Duration
}

func (s skewed) Now() time.Time                  { return s.RealClock.Now().Add(s.offset) }
func (s skewed) Since(t time.Time) time.Duration { return s.Now().Sub(t) }

// TestClockSkewBetweenReplicas runs three replicas of the sharded operator
// whose clocks are 30s behind, exact and 30s ahead — each replica writes its
// member Lease's renewTime, fences itself, and (when elected) judges the
// other members' Leases on its own clock. A judgement that compared another
// machine's renewTime with the local time would see the slow replica's Lease
// as 30s stale (dead, its objects moved without a drain while it still
// reconciles them) or the fast one's as renewed in the future (alive after
// a crash). Through a steady window with spec changes, the crash of a
// replica and then of the replica running the assigner: no object moves
// off a live member, the hand-overs stay within the lease bound, every
// WebApp converges, and no WebApp is ever inside two replicas' Reconcile
// at once.
func TestClockSkewBetweenReplicas(t *testing.T) {
	const (
		lease  = 2 * time.Second
		apps   = 15
		steady = 5 * lease
		skew   = 30 * time.Second
	)
	ns := env.Namespace(t)
	ctx := e2etest.Context(t, 4*time.Minute)
	offsets := []time.Duration{-skew, 0, skew}
	clocks := make([]clock.WithTicker, len(offsets))
	for i, off := range offsets {
		clocks[i] = skewed{offset: off}
	}
	f, err := fleet.NewFleet(env.Config, fleet.Options{Ring: fleet.DefaultRing, Namespace: ns, Replicas: len(offsets), LeaseDuration: lease,
		Scheme: env.Scheme, Hold: 10 * time.Millisecond, Clocks: clocks})
	if err != nil {
		t.Fatal(err)
	}
	skewOf := map[string]time.Duration{}
	for i, r := range f.Replicas {
		skewOf[r.Member] = offsets[i]
	}
	t0 := time.Now()
	f.Start(ctx)
	t.Cleanup(func() {
		if err := f.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	all := f.Running()
	names, err := applyWebApps(ctx, env.Client, ns, apps)
	if err != nil {
		t.Fatal(err)
	}
	waitSnap(t, f, time.Minute, "assignment over three skewed replicas", nil, func(s fleet.Snapshot) (bool, string) {
		if len(s.Apps) != len(names) {
			return false, fmt.Sprintf("%d WebApps listed", len(s.Apps))
		}
		return s.Settled(ns, all)
	})
	snap, _ := waitSnap(t, f, 90*time.Second, "every WebApp Ready", nil, allReady)
	// The skew reaches the Leases: each renewTime is written on its
	// replica's clock, so by the wall clock the slow replica's Lease looks
	// 30s stale and the fast one's renewed 30s in the future.
	members, err := fleet.Members(ctx, env.Client, f.Ring, ns)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		if want := -skewOf[m.Name]; m.Renewed < want-lease || m.Renewed > want+lease {
			t.Errorf("member %s's Lease was renewed %s ago by the wall clock, want about %s: the skew is not in effect", m.Name, m.Renewed, want)
		}
	}
	for m, owned := range snap.ByMember() {
		t.Logf("%s (clock %+v) owns %d WebApps", m, skewOf[m], len(owned))
	}

	// Steady: five lease durations of spec changes. A member judged dead by a
	// skewed clock would lose its WebApps without a drain.
	dead0, drains0 := f.Moves.MovedFromDead(), f.Moves.Drains()
	rng := rand.New(rand.NewPCG(7, 7))
	edits := 0
	for end := time.Now().Add(steady); time.Now().Before(end); time.Sleep(300 * time.Millisecond) {
		name := names[rng.IntN(len(names))]
		patch := fmt.Appendf(nil, `{"spec":{"config":{"skew":"%d"}}}`, edits)
		app := &webappv1.WebApp{}
		app.Namespace, app.Name = ns, name
		if err := env.Client.Patch(ctx, app, client.RawPatch(types.MergePatchType, patch)); err != nil {
			t.Fatal(err)
		}
		edits++
	}
	snap, took := waitSnap(t, f, time.Minute, "every WebApp Ready after the edits", nil, func(s fleet.Snapshot) (bool, string) {
		if ok, why := s.Settled(ns, all); !ok {
			return false, why
		}
		return allReady(s)
	})
	if d := f.Moves.MovedFromDead() - dead0; d != 0 {
		t.Errorf("%d WebApps moved off a member judged dead while all three were alive: a skewed clock misjudged a Lease", d)
	}
	if d := f.Moves.Drains() - drains0; d != 0 {
		t.Errorf("%d drains requested while membership did not change", d)
	}
	t.Logf("steady %s with %d spec edits: no move, no drain; converged %s after the last edit", steady, edits, took.Round(time.Millisecond))

	// A replica crashes (not the assigner's), then the assigner's: each
	// hand-over is judged by a survivor on its own skewed clock.
	victim := pickVictim("auto", f, snap)
	if victim == nil {
		t.Fatal("no non-leader replica to kill")
	}
	t.Logf("crash %s (clock %+v); the assigner runs on %s (clock %+v)", victim.Member, skewOf[victim.Member], f.Leader().Member, skewOf[f.Leader().Member])
	handOver(ctx, t, f, victim, snap, 2*lease)
	leader := f.Leader()
	if leader == nil {
		t.Fatal("no replica runs the assigner")
	}
	snap, _ = waitSnap(t, f, 30*time.Second, "steady", nil, allReady)
	t.Logf("crash the assigner's replica %s (clock %+v)", leader.Member, skewOf[leader.Member])
	handOver(ctx, t, f, leader, snap, 2*time.Second+2*lease+3*time.Second)

	if n, worst := f.Detector.Max(); n != 1 {
		t.Errorf("%d replicas were inside Reconcile at once for %s", n, worst)
	}
	if err := f.Err(); err != nil {
		t.Error(err)
	}
	t.Logf("clocks %v: %d WebApps, %d reconciles, never two replicas in one WebApp's Reconcile; assigner: %s; total %s",
		offsets, apps, f.Detector.Reconciles(), f.Moves, time.Since(t0).Round(100*time.Millisecond))
}
