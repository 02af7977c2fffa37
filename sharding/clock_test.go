package sharding_test

import (
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/sharding"
)

// offsetClock is the wall clock shifted by offset: a machine whose clock is
// that far ahead (behind, when negative). Timers run at the real rate.
type offsetClock struct {
	clock.RealClock
	offset time.Duration
}

func (c offsetClock) Now() time.Time                  { return c.RealClock.Now().Add(c.offset) }
func (c offsetClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// TestMemberLeaseTimesComeFromItsClock: a member writes its Lease's
// acquireTime and renewTime from the clock WithClock gave it, as a member on
// a machine with that clock would, and members whose clocks are an hour
// apart (and an assigner on the exact clock) still share the objects: Lease
// ages are judged by observed renewals, not by comparing those timestamps.
func TestMemberLeaseTimesComeFromItsClock(t *testing.T) {
	ns := env.Namespace(t)
	c := newCluster(t, "clock", ns)
	offsets := map[string]time.Duration{"ahead": time.Hour, "behind": -time.Hour}
	for member, off := range offsets {
		c.start(member, sharding.WithClock(offsetClock{offset: off}))
	}
	ctx := testCtx(t, time.Minute)
	for member, off := range offsets {
		renewals := 0
		var last time.Time
		eventually(t, 30*time.Second, member+"'s Lease renewed twice on its clock", func() (bool, string) {
			var lease coordinationv1.Lease
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: sharding.LeaseName("clock", member)}, &lease); err != nil {
				return false, err.Error()
			}
			if lease.Spec.RenewTime == nil || lease.Spec.AcquireTime == nil {
				return false, "no renewTime or acquireTime"
			}
			want := time.Now().Add(off)
			for what, ts := range map[string]time.Time{"renewTime": lease.Spec.RenewTime.Time, "acquireTime": lease.Spec.AcquireTime.Time} {
				if d := ts.Sub(want); d < -time.Minute || d > time.Minute {
					t.Fatalf("%s's Lease %s %s is %s from its clock's now: not written from the member's clock", member, what, ts, d.Round(time.Second))
				}
			}
			if rt := lease.Spec.RenewTime.Time; !rt.Equal(last) {
				renewals++
				last = rt
			}
			return renewals >= 3, fmt.Sprintf("%d renewTimes seen", renewals)
		})
	}
	c.createConfigMaps(12)
	eventually(t, time.Minute, "objects spread over the skewed members", func() (bool, string) {
		return c.settled([]string{"ahead", "behind"})
	})
	if n, key := c.overlap.Max(); n > 1 {
		t.Errorf("%d members reconciled %s at once", n, key)
	}
	if moved := c.obs.String(); c.obs.movedImmediate.Load() != 0 {
		t.Errorf("objects moved off a member judged dead: %s", moved)
	}
}
