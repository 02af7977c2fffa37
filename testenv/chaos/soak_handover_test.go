package chaos_test

// The soak's hand-over windows: another operator takes the soak's WebApps
// over for the window and hands them back afterwards — the webapp operator
// as it ships, a separate OS process killed with SIGKILL (processWindow),
// and the sharded webapp operator with three replicas on skewed clocks, one
// of which crashes (skewWindow). Both share the soak's route registry: a
// journal file (registry.Open) that the in-process operator, the binary
// (--route-registry) and the sharded replicas all write, so a route left
// behind by a killed process is still counted as leaked.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/examples/sharded/fleet"
	webappv1 "github.com/opkit/opkit/examples/webapp/api/v1"
	"github.com/opkit/opkit/examples/webapp/controller"
	"github.com/opkit/opkit/examples/webapp/registry"
	"github.com/opkit/opkit/testenv/chaos"
)

// burstLabel tags the WebApps of one createBurst.
const burstLabel = "soak.opkit.dev/burst"

// createBurst creates n new WebApps (new names, 16 writers), labelled
// burstLabel=tag, and returns their names. It runs safely beside the load:
// the load never touches a name before its create was acknowledged.
func (l *load) createBurst(ctx context.Context, n int, tag string) []string {
	l.mu.Lock()
	names := make([]string, n)
	for i := range names {
		l.seq++
		names[i] = fmt.Sprintf("app-%04d", l.seq)
		l.apps[names[i]] = &appState{labels: map[string]string{burstLabel: tag}}
	}
	l.mu.Unlock()
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < n; i += 16 {
				l.do(ctx, "create", names[i], "0")
			}
		})
	}
	wg.Wait()
	return names
}

// killMidBurst makes the operator busy and crashes it in the middle: it
// creates a burst of n WebApps and calls kill as soon as the operator has
// reconciled some of them (finalizer on, status for the current
// generation) but not all — its workers are then at work on the burst, the
// rest queued. A burst the operator finished between two looks (every 100
// ms) does not count; it tries again with a burst twice as large, up to 5
// times, each waiting up to bound for the first reconciled WebApp. alive
// reports an operator that ended by itself (the test fails then). It
// returns how many of the burst's WebApps were reconciled at the kill, and
// the burst's size.
func killMidBurst(t *testing.T, ld *load, n int, bound time.Duration, alive func() error, kill func()) (done, total int) {
	t.Helper()
	ctx := ctxFor(t, 10*time.Minute)
	for attempt := range 5 {
		tag := strconv.FormatInt(time.Now().UnixNano(), 36)
		names := ld.createBurst(ctx, n, tag)
		start := time.Now()
		for time.Since(start) < bound {
			if err := alive(); err != nil {
				t.Fatalf("the operator ended by itself before the kill: %v", err)
			}
			var list webappv1.WebAppList
			if err := env.Client.List(ctx, &list, client.InNamespace(ld.ns), client.MatchingLabels{burstLabel: tag}); err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			done = 0
			for i := range list.Items {
				app := &list.Items[i]
				if slices.Contains(app.Finalizers, controller.FinalizerName) && app.Status.ObservedGeneration == app.Generation {
					done++
				}
			}
			if done > 0 && done < len(names) {
				kill()
				return done, len(names)
			}
			if done == len(names) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if done == 0 {
			t.Fatalf("the operator reconciled none of %d new WebApps in %s", len(names), bound)
		}
		t.Logf("burst %d: the operator reconciled all %d new WebApps between two looks; a larger burst", attempt+1, len(names))
		n *= 2
	}
	t.Fatal("the operator finished every burst between two looks: never caught mid-work")
	return 0, 0
}

// handover stops and restarts the soak's in-process operator (and, in the
// full form, its standby) around a window where another operator holds the
// WebApps.
type handover struct {
	t     *testing.T
	ns    string
	oc    opConfig
	op    **operator
	stand **operator
	all   bool
}

// stop ends the in-process replicas (their lease is not released, as in a
// crash) and deletes their leader-election Lease, so the replica start
// brings back leads at once instead of waiting the lease out: the window's
// operator is not a replica of theirs.
func (h handover) stop() {
	(*h.op).stop()
	if *h.stand != nil {
		(*h.stand).stop()
	}
	if !h.all {
		return
	}
	ctx := ctxFor(h.t, time.Minute)
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: h.oc.leaderID}}
	if err := env.Client.Delete(ctx, lease); err != nil && !apierrors.IsNotFound(err) {
		h.t.Fatal(err)
	}
}

// start brings the in-process operator back (a leader, and a standby in the
// full form).
func (h handover) start() {
	*h.op = startOperator(h.t, h.ns, h.oc)
	if !h.all {
		return
	}
	select {
	case <-(*h.op).mgr.Elected():
	case <-time.After(time.Minute):
		h.t.Fatal("the in-process operator did not lead again within a minute of the hand-back")
	}
	*h.stand = startOperator(h.t, h.ns, h.oc)
}

// processKills is how many operator processes the process window kills.
const processKills = 2

// processWindow hands the WebApps to the webapp operator binary bin: a
// process is started (--kubeconfig, --watch-namespace ns, the soak's route
// journal), busied with a burst of creates and SIGKILLed mid-burst,
// processKills times; then a last process is started, which must converge
// everything. It returns that last process (the caller kills it at the
// hand-back), the SIGKILLs sent and what they interrupted.
func processWindow(t *testing.T, ld *load, bin, ns, journal string, bound time.Duration) (*chaos.Process, int, string) {
	t.Helper()
	start := func(i int) *chaos.Process {
		return chaos.StartProcess(t, fmt.Sprintf("webapp-operator-%d", i), bin,
			"--kubeconfig", env.KubeconfigPath, "--watch-namespace", ns,
			"--metrics-bind-address", "0", "--health-probe-bind-address", "0",
			"--webhooks", "off", "--route-registry", journal)
	}
	kills := 0
	var at []string
	for i := range processKills {
		pr := start(i + 1)
		t0 := time.Now()
		done, total := killMidBurst(t, ld, 50, bound, func() error {
			select {
			case <-pr.Exited():
				return fmt.Errorf("%s exited: %w\n%s", pr.Name, pr.Err(), pr.Tail(20))
			default:
				return nil
			}
		}, pr.Kill)
		kills++
		at = append(at, fmt.Sprintf("%d/%d", done, total))
		t.Logf("process window: %s (pid %d) SIGKILLed %.1fs after its start, %d of a burst of %d new WebApps reconciled",
			pr.Name, pr.Pid(), time.Since(t0).Seconds(), done, total)
	}
	last := start(processKills + 1)
	return last, kills, fmt.Sprintf("%d SIGKILLs mid-burst (reconciled at the kill: %v), process %d converges", kills, at, processKills+1)
}

// skewed is a wall clock offset by a fixed duration: a machine whose clock
// is that far ahead (or behind). Timers and tickers run at the real rate;
// Now and Since are shifted (as in examples/sharded's skew test).
type skewed struct {
	clock.RealClock
	offset time.Duration
}

func (s skewed) Now() time.Time                  { return s.RealClock.Now().Add(s.offset) }
func (s skewed) Since(t time.Time) time.Duration { return s.Now().Sub(t) }

// skewLease is the sharded replicas' member Lease duration in the soak: a
// crashed replica's WebApps move after twice this; the clocks are skewed by
// far more (±30 s).
const skewLease = 5 * time.Second

// skewOffsets are the three replicas' clock offsets.
var skewOffsets = []time.Duration{-30 * time.Second, 0, 30 * time.Second}

// skewWindow hands the WebApps to the sharded webapp operator
// (examples/sharded/fleet): three replicas whose clocks are 30 s behind,
// exact and 30 s ahead, sharing the soak's route registry. It waits until
// the assigner has placed every WebApp on its ring member and checks that
// the skew shows in the member Leases, then crashes the non-assigner
// replica owning the most WebApps in the middle of a burst of creates
// (its Leases left to expire), and waits until its WebApps moved to the
// survivors. Until the crash no WebApp may move off a member judged dead.
// It returns the fleet (stopped by the caller at the hand-back, after the
// overlap check), the faults (three skewed replicas and the crash) and what
// happened.
func skewWindow(t *testing.T, ld *load, ns string, reg *registry.Registry, bound, poll time.Duration) (*fleet.Fleet, int, string) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Minute)
	clocks := make([]clock.WithTicker, len(skewOffsets))
	for i, off := range skewOffsets {
		clocks[i] = skewed{offset: off}
	}
	// The replicas' requests go to the API server directly, unthrottled by
	// client-go (as the in-process operator's).
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 500, 1000
	fl, err := fleet.NewFleet(cfg, fleet.Options{Ring: fleet.DefaultRing, Namespace: ns, Replicas: len(skewOffsets),
		LeaseDuration: skewLease, Scheme: env.Scheme, Clocks: clocks, Registry: reg, Concurrency: 8})
	if err != nil {
		t.Fatal(err)
	}
	skewOf := map[string]time.Duration{}
	for i, r := range fl.Replicas {
		skewOf[r.Member] = skewOffsets[i]
	}
	fl.Start(context.Background())
	t.Cleanup(func() { _ = fl.Stop() })
	t0 := time.Now()
	settled := func(members []string, what string) fleet.Snapshot {
		t.Helper()
		var why string
		for start := time.Now(); time.Since(start) < bound; time.Sleep(poll) {
			if err := fl.Err(); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			s, err := fleet.Read(ctx, env.Client, fl.Ring, ns)
			if err != nil {
				why = err.Error()
				continue
			}
			ok, msg := s.Settled(ns, members)
			if ok {
				return s
			}
			why = msg
		}
		t.Fatalf("%s: not settled after %s: %s", what, bound, why)
		return fleet.Snapshot{}
	}
	all := fl.Running()
	snap := settled(all, "assignment over three skewed replicas")
	assigned := time.Since(t0)
	members, err := fleet.Members(ctx, env.Client, fl.Ring, ns)
	if err != nil {
		t.Fatal(err)
	}
	// Each renewTime is written on its replica's clock: by the wall clock
	// the slow replica's Lease looks 30 s stale, the fast one's renewed 30 s
	// in the future. Otherwise the window injected no skew.
	for _, m := range members {
		if want := -skewOf[m.Name]; m.Renewed < want-2*skewLease || m.Renewed > want+2*skewLease {
			t.Errorf("skew window: member %s's Lease was renewed %s ago by the wall clock, want about %s: the skew is not in effect", m.Name, m.Renewed, want)
		}
	}
	by := snap.ByMember()
	var victim *fleet.Replica
	for _, r := range fl.Replicas {
		if r.Running() && !r.Elected() && (victim == nil || len(by[r.Member]) > len(by[victim.Member])) {
			victim = r
		}
	}
	if victim == nil {
		t.Fatal("skew window: no non-assigner replica to crash")
	}
	dead0 := fl.Moves.MovedFromDead()
	if dead0 != 0 {
		t.Errorf("skew window: %d WebApps moved off a member judged dead while all three were alive: a skewed clock misjudged a Lease", dead0)
	}
	owned := len(by[victim.Member])
	done, total := killMidBurst(t, ld, 50, bound, fl.Err, func() {
		if err := victim.Stop(); err != nil {
			t.Errorf("skew window: stopping %s: %v", victim.Member, err)
		}
	})
	crashed := time.Now()
	settled(fl.Running(), "hand-over after the crash")
	moved := time.Since(crashed)
	t.Logf("skew window: clocks %v; assigned in %.1fs; %s (clock %+v, %d WebApps) crashed with %d/%d of a burst reconciled; moved %.1fs after; assigner: %s",
		skewOffsets, assigned.Seconds(), victim.Member, skewOf[victim.Member], owned, done, total, moved.Seconds(), fl.Moves)
	return fl, len(all) + 1, fmt.Sprintf("3 replicas (clocks -30 s/0/+30 s) + 1 crash (%d WebApps moved in %.0fs)", owned, moved.Seconds())
}

// handBackFleet checks the sharded window's invariants once the WebApps
// converged — never two replicas inside one WebApp's Reconcile at once, no
// replica ended by itself — and stops the fleet (its Leases left to
// expire: they name no replica the in-process operator cares about).
func handBackFleet(t *testing.T, fl *fleet.Fleet) {
	t.Helper()
	n, worst := fl.Detector.Max()
	if fl.Detector.Reconciles() == 0 {
		t.Error("skew window: the overlap detector saw no reconcile: the check proved nothing")
	}
	if n > 1 {
		t.Errorf("skew window: %d replicas were inside Reconcile at once for %s", n, worst)
	}
	if err := fl.Err(); err != nil {
		t.Errorf("skew window: %v", err)
	}
	t.Logf("skew window: %d reconciles by the sharded replicas, at most %d replica inside one WebApp's Reconcile at once", fl.Detector.Reconciles(), n)
	if err := fl.Stop(); err != nil {
		t.Errorf("skew window: stop: %v", err)
	}
}
