package chaos_test

// At scale: the webapp operator holds many WebApps while the faults rotate —
// API errors, an API server restart, APF throttling, an API server pause, a
// network cut, expired watches (etcd compacted while the API server is
// away), a conflict storm (16 users fighting over WebApps and their
// Deployments, which the operator reverts), an outage of the webapp's
// webhooks (failurePolicy Ignore), a crash of the leader mid-work (two
// replicas with leader election; the standby takes over), the death of the
// operator as a separate OS process (the webapp binary as it ships, built
// with go build, takes the WebApps over and is SIGKILLed mid-burst twice; a
// third process converges them), and clock skew between the replicas of the
// sharded operator (examples/sharded/fleet: three replicas on clocks −30 s,
// 0 and +30 s take the WebApps over; one crashes mid-burst) — each under a
// steady load of creates, updates and deletes (the throttling window drives
// its own bursts of updates instead). The last two windows hand the WebApps
// back to the in-process operator once they converged.
// After each fault every WebApp must converge; none may be lost or
// duplicated; the time to converge is the fault's recovery. Each window
// counts the faults it actually injected (API errors, 429s the operator
// received, connections dropped, 410s, 409s the operator received, the
// webhook connections dropped or reset, the failover, the SIGKILLs, the
// skewed replicas started and the crash); a window with none fails the
// test, and so does a window skipped for lack of time. The skew window
// also fails when the skew does not show in the member Leases, when a
// WebApp moved off a live member, or when two replicas were ever inside
// one WebApp's Reconcile at once (the fleet's OverlapDetector).
//
// The operator runs as a user of its own (cluster-admin, outside
// system:masters, which APF exempts), so the throttling window can give its
// requests a priority level of their own (throttle, as in
// TestThrottledByPriorityAndFairness).
//
// CI runs the bounded form (100 WebApps, one round, one replica, API errors,
// the API server restart and the conflict storm: the suite's other tests
// cover the other faults). The full form (2,000 WebApps, two replicas,
// the webhooks, every fault) runs with OPKIT_CHAOS_SOAK=1 (or -chaos.soak);
// OPKIT_CHAOS_SOAK_OBJECTS sets another size:
//
//	OPKIT_CHAOS_SOAK=1 go test -run TestSoakAtScale -timeout 40m ./testenv/chaos/
//
// The WebApps ask for 0 replicas: the operator's work per WebApp (finalizer,
// ConfigMap, Deployment, Service, route, status) is the same, and the kwok
// node's 500 pods do not cap the size. kube-controller-manager gets a
// client rate limit of 200 requests/s (default 20 per controller), else its
// Deployment controller, not the operator, sets the pace at 2,000. The
// webapp operator's external side effect is its route registry: a route
// left behind for a deleted WebApp is a leak, and the verdict counts it
// (the test fails while one remains). The registry is a journal file
// (registry.Open) that the in-process operator, the binary
// (--route-registry) and the sharded replicas share, so it outlives a
// SIGKILLed process as an external system would.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/examples/sharded/fleet"
	webappv1 "github.com/opkit/opkit/examples/webapp/api/v1"
	"github.com/opkit/opkit/examples/webapp/controller"
	"github.com/opkit/opkit/examples/webapp/registry"
	"github.com/opkit/opkit/testenv"
	"github.com/opkit/opkit/testenv/chaos"
)

type soakProfile struct {
	objects   int           // WebApps held
	opsPerSec float64       // load during each fault
	fault     time.Duration // length of each timed fault
	clientTO  time.Duration // the operator's rest.Config Timeout
	converge  time.Duration // bound on recovery after a fault
	quiet     time.Duration // steady-state window for the hot-loop check
	maxQuiet  int           // reconciles per object allowed in it
	rounds    int
	all       bool          // every fault; otherwise the ones the rest of the suite does not cover
	budget    time.Duration // no fault starts after this much of the test (0: no limit)
	poll      time.Duration // interval of the convergence checks (each lists every object)
}

func currentSoakProfile(t *testing.T) soakProfile {
	p := soakProfile{objects: 100, opsPerSec: 10, fault: 5 * time.Second, clientTO: 3 * time.Second,
		converge: 3 * time.Minute, quiet: 2 * time.Second, maxQuiet: 3, rounds: 1, poll: time.Second}
	if *soakFlag || os.Getenv("OPKIT_CHAOS_SOAK") == "1" {
		p.objects, p.opsPerSec, p.fault, p.converge, p.quiet, p.all = 2000, 20, 10*time.Second, 4*time.Minute, 5*time.Second, true
		p.poll = 5 * time.Second
	}
	if s := os.Getenv("OPKIT_CHAOS_SOAK_OBJECTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("OPKIT_CHAOS_SOAK_OBJECTS=%q: want a positive number", s)
		}
		p.objects = n
	}
	if p.all {
		// Fill and recovery take about 0.1 s per WebApp here (1,000: 115 s);
		// the budget leaves room for every window at that pace.
		p.converge = max(p.converge, time.Duration(p.objects)*100*time.Millisecond)
		p.budget = 10*time.Minute + time.Duration(p.objects)*750*time.Millisecond
	}
	return p
}

// TestSoakAtScale holds many WebApps through every fault in turn.
func TestSoakAtScale(t *testing.T) {
	p := currentSoakProfile(t)
	testStart := time.Now()
	leaks := leakOptions()
	// envtest's Service range, 10.0.0.0/24, holds 254 Services: the
	// 255th WebApp's Service would never get a cluster IP.
	started := startCompactingEnv(t, testenv.WithControllerManagerArgs("kube-api-qps", "200"), testenv.WithControllerManagerArgs("kube-api-burst", "400"),
		testenv.WithAPIServerArgs("service-cluster-ip-range", "10.96.0.0/16"))
	t.Logf("%d WebApps; control plane up in %.1fs", p.objects, started.Seconds())
	ns := privateNamespace(t)
	panics0 := panics(t)

	// The operator runs as a user of its own, bound to cluster-admin but
	// outside system:masters (which APF exempts), so the throttling window
	// can put its requests in a priority level of their own; the rest of
	// the time APF serves it at global-default like any controller.
	userCfg, user := operatorUser(t, ns)
	proxy, cfg, err := chaos.ProxyConfig(userCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = proxy.Close() }()
	cfg.Timeout = p.clientTO
	cfg.QPS, cfg.Burst = 500, 1000
	// The injector is outside the response counter: responses counts what
	// the server answered, never an injected fault.
	cfg, responses := chaos.CountResponses(cfg)
	cfg, inj, err := chaos.InjectErrors(cfg, 2000)
	if err != nil {
		t.Fatal(err)
	}
	// The route registry is a journal file: the operator binary of the
	// process window and the sharded replicas of the skew window write the
	// same routes, and a route a killed process left behind is still there.
	journal := filepath.Join(t.TempDir(), "routes.journal")
	reg, err := registry.Open(journal)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = reg.Close() }()
	mon := chaos.NewReconcileMonitor()
	fc := chaos.NewFinalizerChecker(controller.FinalizerName, chaos.WithCleanupProbe(func(k types.NamespacedName) bool {
		_, routed := reg.Lookup(k.String())
		return !routed
	}))
	stopWatch := watchFinalizers(t, ns, fc)
	oc := opConfig{cfg: cfg, registry: reg, monitor: mon, concurrency: 16}
	ctx := ctxFor(t, 2*time.Hour)
	var standby *operator // the full form runs two replicas, leader and standby
	if p.all {
		// The lease goes to the API server directly (not through the proxy,
		// the injector or APF), and outlasts its longest pause: the
		// operator's own traffic takes the faults, and the one failover is
		// the one the crash window makes.
		oc.leaderID, oc.lease, oc.electionCfg = "webapp-soak-"+ns, soakLease, env.Config
	}
	op := startOperator(t, ns, oc)
	if p.all {
		select {
		case <-op.mgr.Elected():
		case <-ctx.Done():
			t.Fatal("the first replica never became leader")
		}
		standby = startOperator(t, ns, oc)
	}
	var hooks *webhookOperator
	if p.all {
		// Every WebApp goes through the webapp's defaulting and validating
		// webhooks, served by a manager of their own behind a proxy, with
		// failurePolicy Ignore: the outage window cuts that proxy.
		hooks = startWebhookOperator(t, ns, admissionregistrationv1.Ignore, false)
	}
	ld := newLoad(ns, 2000)
	ld.replicas = ptr.To[int32](0)
	var bin string // the webapp operator as it ships, for the process window
	if p.all {
		bin = chaos.BuildBinary(t, "../../examples/webapp")
	}
	ho := handover{t: t, ns: ns, oc: oc, op: &op, stand: &standby, all: p.all}

	// Fill: p.objects WebApps by 16 writers.
	t0 := time.Now()
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < p.objects; i += 16 {
				ld.step(ctx, p.objects)
			}
		}()
	}
	wg.Wait()
	created := time.Since(t0)
	fill, v := ld.waitConvergedEvery(t, reg, p.converge, p.poll)
	if !v.converged() {
		t.FailNow()
	}
	t.Logf("fill: %d WebApps created in %.1fs, all converged %.1fs later (%d reconciles)", len(ld.live()), created.Seconds(), fill.Seconds(), mon.Total())

	apiWrites := []string{"webapps.apps.example.com", "webapps.apps.example.com/status", "configmaps", "deployments.apps", "services"}
	// A fault window injects its fault and returns how many faults it
	// injected (API errors, connections dropped, 410s, 429s…) and what; a
	// window that injected none proved nothing and fails the test.
	type fault struct {
		name   string
		inject func() (int, string) // the fault is over when it returns
		report func() (int, string) // after recovery, when set: what was injected (replaces inject's)
		lost   func() []string      // after recovery, when set: what the window's own writes lost
		// handBack, when set, runs once the WebApps converged after the
		// window (the recovery measured with the window's operator): it
		// gives them back to the in-process operator.
		handBack func()
		noLoad   bool // the window drives its own load
		always   bool // in the bounded form too
	}
	var expired0, expiryOutages int
	faults := []fault{
		{name: fmt.Sprintf("API errors ≥ %s", p.fault), inject: func() (int, string) {
			// The rules pick from what the operator sends: its writes
			// (it reads from its cache). The window lasts p.fault and is
			// extended (up to 6×) until minInjected faults were injected,
			// so a slow operator still meets them.
			req0 := op.requests.Snapshot()
			before := inj.Injected()
			if err := inj.SetRules(
				chaos.Rule{Verbs: []string{"update", "patch"}, Resources: apiWrites, Probability: 0.2, Fault: chaos.Conflict()},
				chaos.Rule{Verbs: []string{"create"}, Probability: 0.2, Fault: chaos.TooManyRequests(time.Second)},
				chaos.Rule{Verbs: []string{"create", "patch"}, Resources: apiWrites, Probability: 0.1, Fault: chaos.LostResponse()},
				chaos.Rule{Verbs: []string{"get", "list"}, Probability: 0.1, Fault: chaos.ServerError(500)},
				chaos.Rule{Verbs: []string{"patch", "update", "delete"}, Probability: 0.1, Fault: chaos.ServerTimeout()},
			); err != nil {
				t.Fatal(err)
			}
			t0 := time.Now()
			time.Sleep(p.fault)
			for inj.Injected()-before < minInjected && time.Since(t0) < 6*p.fault {
				time.Sleep(time.Second)
			}
			if err := inj.SetRules(); err != nil {
				t.Fatal(err)
			}
			n := inj.Injected() - before
			t.Logf("API errors: %d injected in %.1fs; the operator sent meanwhile: %s", n, time.Since(t0).Seconds(), requestsSince(op.requests, req0))
			return n, fmt.Sprintf("%d API errors in %.0fs", n, time.Since(t0).Seconds())
		}, always: true},
		{name: "API server restart", inject: func() (int, string) {
			if err := env.RestartAPIServer(); err != nil {
				t.Fatal(err)
			}
			return 1, "1 restart"
		}, always: true},
		{name: fmt.Sprintf("APF throttling ≥ %s (1 seat share, 1 queue × 1)", p.fault), noLoad: true, inject: func() (int, string) {
			return throttleWindow(t, ld, user, responses, p.fault)
		}},
		{name: fmt.Sprintf("API server paused %s", p.fault), inject: func() (int, string) {
			if err := env.Pause(testenv.APIServer); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = env.Resume(testenv.APIServer) }()
			time.Sleep(p.fault)
			if err := env.Resume(testenv.APIServer); err != nil {
				t.Fatal(err)
			}
			return 1, "1 SIGSTOP/SIGCONT"
		}},
		{name: fmt.Sprintf("network cut %s", p.fault), inject: func() (int, string) {
			accepted0, dropped0, _ := proxy.Stats()
			proxy.Cut()
			time.Sleep(p.fault)
			accepted1, dropped1, _ := proxy.Stats()
			proxy.Restore()
			// Open connections closed by the cut, and new ones reset during it.
			dropped, reset := dropped1-dropped0, accepted1-accepted0
			return dropped + reset, fmt.Sprintf("1 cut: %d connections dropped, %d reset", dropped, reset)
		}},
		{name: fmt.Sprintf("watches expired (refused %s, compaction %s)", max(p.fault, 4*compactionInterval), compactionInterval), inject: func() (int, string) {
			// The reflectors resume their watches after their back-off
			// (up to ~30 s); the window waits that long for a 410 and
			// takes the server away again (3 outages at most) if none
			// came. The count is what arrived: none still fails.
			expired0 = responses.Expired()
			for expiryOutages = 1; ; expiryOutages++ {
				proxy.Refuse()
				time.Sleep(max(p.fault, 4*compactionInterval))
				proxy.Restore()
				for t0 := time.Now(); responses.Expired() == expired0 && time.Since(t0) < 30*time.Second; {
					time.Sleep(500 * time.Millisecond)
				}
				if responses.Expired() > expired0 || expiryOutages == 3 {
					return 0, ""
				}
				t.Logf("watch expiry: no 410 within 30 s of outage %d; the server goes away again", expiryOutages)
			}
		}, report: func() (int, string) {
			// The informers resume after their back-off, some after the
			// WebApps converged: count once the caches caught up.
			n := responses.Expired() - expired0
			return n, fmt.Sprintf("%d×410 (%d outage(s))", n, expiryOutages)
		}}, // full form only: in CI's bounded form (100 WebApps) the window
		// once saw no 410 at all; TestWatchExpiryRelists proves expiry there.
	}
	var stormLost func() []string
	faults = append(faults, fault{name: fmt.Sprintf("conflict storm ≥ %s (16 users × 8 WebApps + Deployments)", p.fault), inject: func() (int, string) {
		var n int
		var what string
		n, what, stormLost = stormWindow(t, ld, responses, p.fault, 16, 8)
		return n, what
	}, lost: func() []string { return stormLost() }, always: true})
	if p.all {
		faults = append(faults, fault{name: fmt.Sprintf("webhook outage %s (failurePolicy Ignore)", p.fault), inject: func() (int, string) {
			accepted0, dropped0, _ := hooks.proxy.Stats()
			hooks.proxy.Cut()
			time.Sleep(p.fault)
			accepted1, dropped1, _ := hooks.proxy.Stats()
			hooks.proxy.Restore()
			hooks.waitServing(t, ns)
			// The API server's open connections to the webhooks closed by
			// the cut, and its new ones reset during it.
			dropped, reset := dropped1-dropped0, accepted1-accepted0
			return dropped + reset, fmt.Sprintf("1 outage: %d webhook connections dropped, %d reset", dropped, reset)
		}})
		faults = append(faults, fault{name: fmt.Sprintf("leader crash mid-work (lease %s)", soakLease.duration), inject: func() (int, string) {
			takeover, first, inflight := failoverWindow(t, mon, op, standby, soakLease)
			// The standby leads; a new replica stands by.
			op, standby = standby, startOperator(t, ns, oc)
			return 1, fmt.Sprintf("1 failover (%d reconciling): leader %.1fs, reconciling %.1fs", inflight, takeover.Seconds(), first.Seconds())
		}})
		var last *chaos.Process
		faults = append(faults, fault{name: fmt.Sprintf("operator process SIGKILLed mid-work (binary, %d kills)", processKills), inject: func() (int, string) {
			ho.stop()
			var n int
			var what string
			last, n, what = processWindow(t, ld, bin, ns, journal, p.converge)
			return n, what
		}, handBack: func() {
			last.Kill()
			ho.start()
		}})
		var fl *fleet.Fleet
		faults = append(faults, fault{name: "clock skew ±30 s: sharded operator, 3 replicas, 1 crash", inject: func() (int, string) {
			ho.stop()
			var n int
			var what string
			// The assigner labels every WebApp and its three children
			// (4 workers), and drains as the replicas join one by one.
			fl, n, what = skewWindow(t, ld, ns, reg, p.converge+time.Duration(p.objects)*200*time.Millisecond, p.poll)
			return n, what
		}, handBack: func() {
			handBackFleet(t, fl)
			ho.start()
		}})
	}

	var rows []row
	for round := range p.rounds {
		for _, f := range faults {
			if !p.all && !f.always {
				continue
			}
			if p.budget > 0 && time.Since(testStart) > p.budget {
				t.Errorf("SKIPPED (time budget %s spent): %s", p.budget, f.name)
				continue
			}
			mk := mon.Mark()
			ops0 := ld.ok.Load() + ld.fail.Load()
			lctx, stopLoad := context.WithCancel(ctx)
			loadDone := make(chan struct{})
			t0 := time.Now()
			if f.noLoad {
				close(loadDone)
			} else {
				go func() { defer close(loadDone); ld.run(lctx, profile{opsPerSec: p.opsPerSec, objects: p.objects}) }()
				time.Sleep(time.Second)
			}
			count, injected := f.inject()
			stopLoad()
			<-loadDone
			loadTime := time.Since(t0)
			ops := ld.ok.Load() + ld.fail.Load() - ops0
			recovery, v := ld.waitConvergedEvery(t, reg, p.converge, p.poll)
			if f.handBack != nil {
				f.handBack()
			}
			caughtUp := waitCachesCaughtUp(t, op, ns, p.converge, p.poll)
			if f.report != nil {
				count, injected = f.report()
			}
			if count == 0 {
				t.Errorf("%s: the window injected no fault (%s): it proved nothing", f.name, injected)
			}
			if f.lost != nil {
				if lost := f.lost(); len(lost) > 0 {
					v.lost = append(v.lost, lost...)
				}
			}
			ld.mu.Lock()
			objects := len(ld.live())
			ld.mu.Unlock()
			r := row{
				test: "soak", fault: f.name, objects: objects, ops: ops, opsPerSec: float64(ops) / loadTime.Seconds(),
				injected: injected, lost: len(v.lost), duplicates: len(v.duplicates), recovery: recovery, ready: v.ready,
				maxReconciles: maxOf(mon.Since(mk)),
			}
			if p.rounds > 1 {
				r.fault = fmt.Sprintf("#%d %s", round+1, f.name)
			}
			rows = append(rows, r)
			t.Logf("%s: %s; %d ops; converged %.1fs after the fault, caches caught up %.1fs after that; lost %d, duplicates %d; routes %d",
				f.name, injected, ops, recovery.Seconds(), caughtUp.Seconds(), len(v.lost), len(v.duplicates), reg.Len())
			if len(v.duplicates) > 0 || len(v.lost) > 0 {
				t.Errorf("%s: lost %v, duplicates %v", f.name, head(v.lost, 10), head(v.duplicates, 10))
			}
			if err := checkQuiet(t, mon, ns, p.quiet, p.maxQuiet); err != nil {
				t.Errorf("%s: %v", f.name, err)
			}
		}
	}
	logTable(t, rows)
	ld.mu.Lock()
	live := len(ld.live())
	ld.mu.Unlock()
	t.Logf("reconciles %d; finalizers removed after cleanup %d; load ops ok %d, failed %d; routes registered %d for %d live WebApps; 410s %d, 429s %d",
		mon.Total(), fc.Finalized(), ld.ok.Load(), ld.fail.Load(), reg.Len(), live, responses.Expired(), responses.Status(429))
	if reg.Len() != live {
		t.Errorf("the route registry holds %d routes for %d live WebApps: leaked or missing routes", reg.Len(), live)
	}
	if err := errors.Join(mon.Check(), fc.Check()); err != nil {
		t.Error(err)
	}
	if d := panics(t) - panics0; d != 0 {
		t.Errorf("controller-runtime recovered %v reconcile panics", d)
	}
	op.stop()
	if standby != nil {
		standby.stop()
	}
	if hooks != nil {
		hooks.stop()
	}
	stopWatch()
	_ = proxy.Close()
	stopEnvNow(t)
	goleak.VerifyNone(t, leaks...)
}

// minInjected is how many API errors the API-error window waits for
// before it closes (it may close with fewer at its bound; with none the
// test fails).
const minInjected = 20

// requestsSince summarises the requests rc counted after before was taken:
// the total, the writes, and the counts per verb and resource.
func requestsSince(rc *testenv.RequestCounter, before map[testenv.Request]int) string {
	var lines []string
	total, writes := 0, 0
	for k, v := range rc.Snapshot() {
		d := v - before[k]
		if d == 0 {
			continue
		}
		total += d
		if k.IsWrite() {
			writes += d
		}
		lines = append(lines, fmt.Sprintf("%s %s: %d", k.Verb, k.Resource, d))
	}
	sort.Strings(lines)
	return fmt.Sprintf("%d requests, %d writes (%s)", total, writes, strings.Join(lines, ", "))
}

// throttleWindow puts user's requests in a priority level of their own
// (throttle) for at least d, updating live WebApps in bursts of distinct
// objects meanwhile (the operator's work then comes in bursts of 16
// reconciles), until the operator has received a 429 or 6×d passed; then
// it removes the throttle. It returns the 429s the operator received, and
// says what the API server rejected, by reason.
func throttleWindow(t *testing.T, ld *load, user string, responses *chaos.ResponseCounter, d time.Duration) (int, string) {
	t.Helper()
	pl, undo := throttle(t, user)
	defer undo()
	got0 := responses.Status(http.StatusTooManyRequests)
	rejected0 := apfRejected(t, pl)
	ctx := ctxFor(t, 10*time.Minute)
	t0 := time.Now()
	bursts, updated := 0, 0
	for next := 0; ; bursts++ {
		got := responses.Status(http.StatusTooManyRequests) - got0
		if el := time.Since(t0); el >= 6*d || el >= d && got > 0 {
			break
		}
		ld.mu.Lock()
		live := ld.live()
		ld.mu.Unlock()
		if len(live) == 0 {
			t.Fatal("APF window: no live WebApp to update")
		}
		var names []string
		for i := 0; i < min(200, len(live)); i++ {
			names = append(names, live[(next+i)%len(live)])
		}
		next += len(names)
		ld.updateEach(ctx, names, 16)
		updated += len(names)
		time.Sleep(time.Second)
	}
	undo()
	n := responses.Status(http.StatusTooManyRequests) - got0
	rejected := apfRejected(t, pl)
	for k, v := range rejected0 {
		rejected[k] -= v
	}
	t.Logf("APF window: %.1fs, %d bursts (%d updates); 429s received by the operator %d; rejected by APF at %s: %v",
		time.Since(t0).Seconds(), bursts, updated, n, pl, rejected)
	return n, fmt.Sprintf("%d×429 (server: %.0f rejected %v) in %.0fs", n, total(rejected), rejected, time.Since(t0).Seconds())
}

// soakLease is the full soak's leader election: its renew deadline
// outlasts the longest outage a window makes (an API server paused 10 s,
// a restart), so the leader keeps its lease through every window but the
// crash.
var soakLease = leaseTimes{duration: 30 * time.Second, renew: 20 * time.Second, retry: 2 * time.Second}

// stormWindow has writers users fight over targets live WebApps and their
// Deployments for at least d while the operator reconciles them, until the
// operator has received a 409 or 6×d passed. Each writer in turn sets a
// label of its own on a WebApp (setLabel: read, update with the
// resourceVersion read, again on a conflict) and changes the image of that
// WebApp's Deployment the same way; the operator reverts the image with a
// patch carrying the resourceVersion it read, which gets a 409 when its
// cache is behind. It returns the 409s the operator received (the server's
// answers: the injector is off), what the window did, and a check for
// after recovery that lists what the users lost: an acknowledged label
// missing from a WebApp still alive, or a Deployment whose image the
// operator did not set back (it polls for up to a minute).
func stormWindow(t *testing.T, ld *load, responses *chaos.ResponseCounter, d time.Duration, writers, targets int) (int, string, func() []string) {
	t.Helper()
	ld.mu.Lock()
	live := ld.live()
	ld.mu.Unlock()
	names := head(live, targets)
	if len(names) == 0 {
		t.Fatal("conflict storm: no live WebApp")
	}
	ctx := ctxFor(t, 10*time.Minute)
	got0 := responses.Status(http.StatusConflict)
	var mu sync.Mutex
	acked := map[string]map[string]string{} // WebApp → label → last acknowledged value
	var userConflicts atomic.Int64
	var edits atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			label := fmt.Sprintf("storm-writer-%02d", w)
			for i := 1; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				name := names[(w+i)%len(names)]
				key := client.ObjectKey{Namespace: ld.ns, Name: name}
				err := setLabel(ctx, key, label, strconv.Itoa(i), &userConflicts)
				if err == nil {
					mu.Lock()
					if acked[name] == nil {
						acked[name] = map[string]string{}
					}
					acked[name][label] = strconv.Itoa(i)
					mu.Unlock()
					edits.Add(1)
					err = retry.OnError(stormBackoff(), apierrors.IsConflict, func() error {
						var dep appsv1.Deployment
						if err := env.Client.Get(ctx, key, &dep); err != nil {
							return err
						}
						dep.Spec.Template.Spec.Containers[0].Image = fmt.Sprintf("nginx:storm-%d-%d", w, i)
						err := env.Client.Update(ctx, &dep)
						if apierrors.IsConflict(err) {
							userConflicts.Add(1)
						}
						return err
					})
					if err == nil {
						edits.Add(1)
					}
				}
				// The load may delete a target meanwhile.
				if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
					t.Errorf("conflict storm, writer %d on %s: %v", w, name, err)
					return
				}
			}
		}()
	}
	t0 := time.Now()
	time.Sleep(d)
	for responses.Status(http.StatusConflict) == got0 && time.Since(t0) < 6*d {
		time.Sleep(time.Second)
	}
	close(stop)
	wg.Wait()
	n := responses.Status(http.StatusConflict) - got0
	t.Logf("conflict storm: %.1fs, %d writers on %d WebApps: %d edits, %d 409s to the users, %d to the operator",
		time.Since(t0).Seconds(), writers, len(names), edits.Load(), userConflicts.Load(), n)
	what := fmt.Sprintf("%d×409 (users %d, %d edits) in %.0fs", n, userConflicts.Load(), edits.Load(), time.Since(t0).Seconds())
	check := func() []string {
		var lost []string
		for start := time.Now(); ; time.Sleep(time.Second) {
			lost = lost[:0]
			for _, name := range names {
				ld.mu.Lock()
				alive := slices.Contains(ld.live(), name)
				ld.mu.Unlock()
				if !alive {
					continue
				}
				key := client.ObjectKey{Namespace: ld.ns, Name: name}
				var app webappv1.WebApp
				var dep appsv1.Deployment
				if err := env.Client.Get(ctx, key, &app); err != nil {
					lost = append(lost, fmt.Sprintf("%s: %v", name, err))
					continue
				}
				mu.Lock()
				for k, want := range acked[name] {
					if got := app.Labels[k]; got != want {
						lost = append(lost, fmt.Sprintf("%s: label %s=%q, want %q", name, k, got, want))
					}
				}
				mu.Unlock()
				if err := env.Client.Get(ctx, key, &dep); err != nil {
					lost = append(lost, fmt.Sprintf("%s: Deployment: %v", name, err))
					continue
				}
				want := controller.Children(&app)
				for _, c := range want {
					if wd, ok := c.(*appsv1.Deployment); ok && wd.Spec.Template.Spec.Containers[0].Image != dep.Spec.Template.Spec.Containers[0].Image {
						lost = append(lost, fmt.Sprintf("%s: Deployment image %s, want %s", name, dep.Spec.Template.Spec.Containers[0].Image, wd.Spec.Template.Spec.Containers[0].Image))
					}
				}
			}
			if len(lost) == 0 || time.Since(start) > time.Minute {
				return lost
			}
		}
	}
	return n, what, check
}

// failoverWindow crashes leader mid-work: once reconciles are in flight it
// ends the leader's manager (its context is cancelled; the lease is not
// released, as when a process dies) and waits for standby to take the
// lease (within lt's bound) and then to start a reconcile. It returns the
// time from the crash to standby's election and to its first reconcile,
// and how many reconciles were in flight at the crash.
func failoverWindow(t *testing.T, mon *chaos.ReconcileMonitor, leader, standby *operator, lt leaseTimes) (takeover, first time.Duration, inflight int) {
	t.Helper()
	ctx := ctxFor(t, 2*time.Minute)
	if err := mon.WaitInFlight(ctx); err != nil {
		t.Fatalf("no reconcile in flight to interrupt: %v", err)
	}
	inflight = mon.InFlight()
	crashed := time.Now()
	leader.stop()
	total0 := mon.Total() // every reconcile from here on is the standby's
	bound := lt.duration + 3*lt.retry + 5*time.Second
	select {
	case <-standby.mgr.Elected():
	case <-time.After(bound):
		t.Fatalf("the standby did not take over within %s", bound)
	}
	takeover = time.Since(crashed)
	if limit := lt.duration + 3*lt.retry + time.Second; takeover > limit {
		t.Errorf("takeover took %s, more than the lease bound %s", takeover, limit)
	}
	for mon.Total() == total0 {
		if time.Since(crashed) > 2*bound {
			t.Fatalf("the new leader started no reconcile within %s of the crash", 2*bound)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return takeover, time.Since(crashed), inflight
}
