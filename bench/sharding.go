package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/examples/sharded/fleet"
	webappv1 "github.com/opkit/opkit/examples/webapp/api/v1"
	"github.com/opkit/opkit/reconciler"
	"github.com/opkit/opkit/sharding"
	"github.com/opkit/opkit/testenv"
)

// ScenarioSharding runs opkit's webapp operator as a sharded fleet
// (examples/sharded/fleet) next to one unsharded opkit replica, on a fresh
// control plane of its own. Only the opkit contender has it: neither the
// ceiling nor the kubebuilder baseline shards.
const ScenarioSharding = "sharding"

// benchRing is the ring the sharding scenario's replicas form.
const benchRing = "bench"

// ShardingResult is the sharding scenario's figures.
type ShardingResult struct {
	// N WebApps (each with a ConfigMap, Deployment and Service), Replicas
	// members, LeaseDuration of every member Lease.
	N             int           `json:"n"`
	Replicas      int           `json:"replicas"`
	LeaseDuration time.Duration `json:"leaseDuration"`
	// Leader is the member that ran the assigner throughout.
	Leader string `json:"leader"`
	// Spread is how many WebApps each member owned once the ring settled.
	Spread map[string]int `json:"spread"`
	// InitialSeconds runs from starting the fleet on N WebApps an unsharded
	// replica had converged to every WebApp labelled for its member, its
	// children labelled alike and reconciled by that member; InitialWrites
	// are the fleet's writes meanwhile (as HandOver.Writes counts them).
	InitialSeconds float64 `json:"initialSeconds"`
	InitialWrites  int     `json:"initialWrites"`
	// UnshardedHeapBytes is the live heap one unsharded opkit manager added
	// once it had reconciled every WebApp after a restart (as in the restart
	// scenario); FleetHeapBytes the same for the whole fleet of Replicas
	// managers, the assigner's metadata caches included.
	UnshardedHeapBytes float64 `json:"unshardedHeapBytes"`
	FleetHeapBytes     float64 `json:"fleetHeapBytes"`
	// ShardCacheBytes is the live heap of a fresh cache holding exactly one
	// member's shard (the four kinds, selected by its shard label,
	// managedFields stripped as the replicas do), by member; ShardObjects
	// the WebApps in it. UnshardedCacheBytes is that cache without the
	// selector, EmptyCacheBytes with a selector nothing matches (the fixed
	// cost of four informers).
	ShardCacheBytes     map[string]float64 `json:"shardCacheBytes"`
	ShardObjects        map[string]int     `json:"shardObjects"`
	UnshardedCacheBytes float64            `json:"unshardedCacheBytes"`
	EmptyCacheBytes     float64            `json:"emptyCacheBytes"`
	// Graceful is a member stopped with its Lease released; Ungraceful one
	// that stops renewing its Lease (a crash, to the others).
	Graceful   HandOver `json:"graceful"`
	Ungraceful HandOver `json:"ungraceful"`
	// MaxConcurrent is the most replicas ever inside one WebApp's reconcile
	// at once (the guarantee: 1).
	MaxConcurrent int    `json:"maxConcurrent"`
	Reconciles    int    `json:"reconciles"`
	Error         string `json:"error,omitempty"`
}

// HandOver is one member leaving the ring and its WebApps moving.
type HandOver struct {
	Member  string `json:"member"`
	Objects int    `json:"objects"`
	// LabelledSeconds runs from the stop to every moved WebApp labelled for
	// the member the ring of survivors places it on; Seconds to every one of
	// them also reconciled by that member.
	LabelledSeconds float64 `json:"labelledSeconds"`
	Seconds         float64 `json:"seconds"`
	// Bound is what the design promises: the stopping member's in-flight
	// reconciles for a graceful stop (reported as 0), two lease durations
	// for a crash.
	Bound float64 `json:"bound"`
	// Requests are the fleet's API requests during the hand-over (until no
	// request but Lease renewals came for Quiet); Writes counts the writes
	// among them, events included, Lease renewals excluded.
	Requests map[string]int `json:"requests"`
	Writes   int            `json:"writes"`
	// Failed counts the fleet's failed requests by status code (0: transport
	// error), Lease renewals included.
	Failed map[int]int `json:"failed,omitempty"`
	// NotReady counts WebApps not Ready when the hand-over completed.
	NotReady int    `json:"notReady"`
	Error    string `json:"error,omitempty"`
}

// runSharding is the sharding scenario: N WebApps converged by one unsharded
// opkit replica, whose restart heap is measured; then a fleet of three
// sharded replicas takes them over; its heap and each shard's cache are
// measured; one member leaves gracefully, another crashes.
func runSharding(ctx context.Context, o Options) (_ *ShardingResult, err error) {
	if o.Settings.ShardObjects <= 0 {
		o.Settings.ShardObjects = o.Settings.N
	}
	if o.Settings.ShardLeaseDuration <= 0 {
		o.Settings.ShardLeaseDuration = sharding.DefaultLeaseDuration
	}
	s := o.Settings
	n := s.ShardObjects
	res := &ShardingResult{N: n, Replicas: 3, LeaseDuration: s.ShardLeaseDuration}
	logf(o.Log, "== %s: fresh control plane for %s (%d WebApps, %d replicas, lease %s)", Opkit, ScenarioSharding, n, res.Replicas, res.LeaseDuration)
	cl, err := startCluster(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, cl.stop()) }()

	// The unsharded reference: what the restart scenario measures, on the
	// same WebApps the fleet takes over.
	ro := o
	ro.Settings.N = n
	r := &runner{o: ro, cl: cl, contender: Opkit}
	single, err := r.restart(ctx)
	if err == nil && !single.Converged {
		err = fmt.Errorf("unsharded replica: %d of %d WebApps not reconciled: %s", single.Outstanding, n, single.Error)
	}
	if err = errors.Join(err, r.stopInstance()); err != nil {
		return nil, err
	}
	res.UnshardedHeapBytes = single.HeapBytes
	logf(o.Log, "   unsharded replica: heap %.1f MiB for %d WebApp bundles", single.HeapBytes/(1<<20), n)

	if err := shardFleet(ctx, o, cl, res); err != nil {
		res.Error = err.Error()
	}
	return res, nil
}

func shardFleet(ctx context.Context, o Options, cl *cluster, res *ShardingResult) (err error) {
	s := o.Settings
	cfg := rest.CopyConfig(cl.env.Config)
	cfg.QPS, cfg.Burst = s.QPS, s.Burst
	cfg, req := testenv.CountRequests(cfg)
	cfg, fail := countFailures(cfg)
	members := []string{"replica-0", "replica-1", "replica-2"}
	f := &fleet.Fleet{Ring: benchRing, Namespace: namespace, LeaseDuration: s.ShardLeaseDuration,
		Detector: fleet.NewOverlapDetector(0), Moves: &fleet.MoveCounter{}}
	for i, m := range members {
		rep, err := fleet.NewReplica(cfg, fleet.ReplicaOptions{
			Ring: benchRing, Member: m, Namespace: namespace, LeaseDuration: s.ShardLeaseDuration, Scheme: cl.scheme,
			Detector: f.Detector, Observer: f.Moves, Concurrency: s.Workers,
			// replica-0 leaves gracefully, replica-1 crashes; replica-2 stays.
			ReleaseOnStop: i == 0,
		})
		if err != nil {
			return err
		}
		f.Replicas = append(f.Replicas, rep)
	}
	// Helpers' caches stay out of the heap figures; the WebApps are converged
	// and nothing in the hand-overs needs the Deployment stub.
	cl.stopHelpers()
	defer func() { err = errors.Join(err, cl.startHelpers(ctx)) }()
	heap0 := liveHeap()
	start := time.Now()
	// The member that runs the assigner starts first, so it wins the election
	// and stays the leader: the hand-overs below measure members leaving, not
	// a new election.
	leader := f.Replicas[2]
	leader.Start(ctx)
	if err := pollUntil(ctx, time.Minute, func() (bool, error) { return leader.Elected(), nil }); err != nil {
		return fmt.Errorf("%s never won the assigner's election: %w", leader.Member, err)
	}
	res.Leader = leader.Member
	f.Replicas[0].Start(ctx)
	f.Replicas[1].Start(ctx)
	defer func() { err = errors.Join(err, f.Stop()) }()
	timeout := convergeTimeout(res.N) + 4*s.ShardLeaseDuration
	snap, err := waitHandedTo(ctx, cl, f, members, nil, start, timeout)
	if err != nil {
		return fmt.Errorf("initial assignment: %w", err)
	}
	res.InitialSeconds = time.Since(start).Seconds()
	settleRequests(ctx, req, s.Quiet)
	res.InitialWrites = writeCount(req)
	res.FleetHeapBytes = liveHeap() - heap0
	res.Spread = map[string]int{}
	for m, names := range snap.ByMember() {
		res.Spread[m] = len(names)
	}
	logf(o.Log, "   fleet: %d WebApps assigned and reconciled in %.1fs (%d writes), spread %v, heap %.1f MiB",
		res.N, res.InitialSeconds, res.InitialWrites, res.Spread, res.FleetHeapBytes/(1<<20))

	if err := shardCaches(ctx, cl, members, res); err != nil {
		return err
	}
	logf(o.Log, "   caches: unsharded %.1f MiB, per shard %v MiB, empty %.2f MiB", res.UnshardedCacheBytes/(1<<20), mibMap(res.ShardCacheBytes), res.EmptyCacheBytes/(1<<20))

	fail.reset()
	res.Graceful = handOver(ctx, o, cl, f, req, fail, f.Replicas[0], members[1:], 0)
	logf(o.Log, "   graceful: %s", res.Graceful.summary())
	res.Ungraceful = handOver(ctx, o, cl, f, req, fail, f.Replicas[1], members[2:], 2*s.ShardLeaseDuration.Seconds())
	logf(o.Log, "   ungraceful: %s", res.Ungraceful.summary())
	res.MaxConcurrent, _ = f.Detector.Max()
	res.Reconciles = f.Detector.Reconciles()
	return f.Err()
}

func (h HandOver) summary() string {
	s := fmt.Sprintf("%s's %d WebApps labelled in %.1fs, reconciled by survivors in %.1fs (bound %.0fs), %d writes, %d failed, %d not Ready",
		h.Member, h.Objects, h.LabelledSeconds, h.Seconds, h.Bound, h.Writes, sumValues(h.Failed), h.NotReady)
	if h.Error != "" {
		s += " error=" + h.Error
	}
	return s
}

// handOver stops victim and times its WebApps' move to survivors.
func handOver(ctx context.Context, o Options, cl *cluster, f *fleet.Fleet, req *testenv.RequestCounter, fail *failureCounter, victim *fleet.Replica, survivors []string, bound float64) HandOver {
	h := HandOver{Member: victim.Member, Bound: bound}
	before, err := fleet.Read(ctx, cl.admin, benchRing, namespace)
	if err != nil {
		h.Error = err.Error()
		return h
	}
	moving := before.ByMember()[victim.Member]
	h.Objects = len(moving)
	req.Reset()
	fail.reset()
	start := time.Now()
	if err := victim.Stop(); err != nil {
		h.Error = err.Error()
		return h
	}
	timeout := 2*time.Minute + 4*o.Settings.ShardLeaseDuration
	labelled := time.Duration(0)
	snap, err := waitHandedTo(ctx, cl, f, survivors, moving, start, timeout, func(s fleet.Snapshot) {
		if labelled == 0 && allLabelled(s, survivors, moving) {
			labelled = time.Since(start)
		}
	})
	h.Seconds = time.Since(start).Seconds()
	h.LabelledSeconds = labelled.Seconds()
	if err != nil {
		h.Error = err.Error()
	}
	h.NotReady = len(snap.NotReady)
	settleRequests(ctx, req, o.Settings.Quiet)
	h.Requests = map[string]int{}
	for k, v := range req.Snapshot() {
		h.Requests[k.String()] += v
	}
	h.Writes = writeCount(req)
	h.Failed = fail.snapshot()
	return h
}

// allLabelled reports whether every one of names is labelled for the member
// the ring of members places it on.
func allLabelled(s fleet.Snapshot, members, names []string) bool {
	ring := sharding.NewRing(members)
	for _, name := range names {
		if s.Owner[name] != ring.Lookup(sharding.ObjectKey(webAppGK, namespace, name)) {
			return false
		}
	}
	return true
}

var webAppGK = webappv1.GroupVersion.WithKind("WebApp").GroupKind()

// waitHandedTo waits until the ring of members has settled (every WebApp
// labelled for its member, none draining), every WebApp is Ready, and each of
// names (every WebApp when nil) has been reconciled by its new member since
// since. check, when given, sees every snapshot.
func waitHandedTo(ctx context.Context, cl *cluster, f *fleet.Fleet, members, names []string, since time.Time, timeout time.Duration, check ...func(fleet.Snapshot)) (fleet.Snapshot, error) {
	var snap fleet.Snapshot
	why := "not polled yet"
	err := pollUntil(ctx, timeout, func() (bool, error) {
		var err error
		if snap, err = fleet.Read(ctx, cl.admin, benchRing, namespace); err != nil {
			return false, err
		}
		for _, c := range check {
			c(snap)
		}
		if ok, w := snap.Settled(namespace, members); !ok {
			why = w
			return false, nil
		}
		if len(snap.NotReady) > 0 {
			why = fmt.Sprintf("%d WebApps not Ready (%s, …)", len(snap.NotReady), snap.NotReady[0])
			return false, nil
		}
		todo := names
		if todo == nil {
			todo = make([]string, 0, len(snap.Apps))
			for _, app := range snap.Apps {
				todo = append(todo, app.Name)
			}
		}
		for _, name := range todo {
			owner := snap.Owner[name]
			visits := f.Detector.Visits(types.NamespacedName{Namespace: namespace, Name: name})
			if !slices.ContainsFunc(visits, func(v fleet.Visit) bool { return v.Member == owner && !v.At.Before(since) }) {
				why = fmt.Sprintf("%s not yet reconciled by %s", name, owner)
				return false, nil
			}
		}
		if err := f.Err(); err != nil {
			return false, err
		}
		return true, nil
	})
	if err != nil {
		return snap, fmt.Errorf("%w (%s)", err, why)
	}
	return snap, nil
}

// pollUntil calls cond every 250ms (at once first) until it returns true or
// an error, or timeout passes.
func pollUntil(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	return wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) { return cond() })
}

// isLease reports whether k is a Lease request: member and leader-election
// renewals, which run on a timer whatever the objects do.
func isLease(k testenv.Request) bool { return strings.HasPrefix(k.Resource, "leases") }

// settleRequests waits until req's requests other than Lease renewals have
// not moved for quiet (at most 30s).
func settleRequests(ctx context.Context, req *testenv.RequestCounter, quiet time.Duration) {
	last, stable := -1, time.Now()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		t := 0
		for k, v := range req.Snapshot() {
			if !isLease(k) {
				t += v
			}
		}
		if t != last {
			last, stable = t, time.Now()
		} else if time.Since(stable) >= quiet {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// writeCount counts req's writes other than Lease renewals.
func writeCount(req *testenv.RequestCounter) int {
	w := 0
	for k, v := range req.Snapshot() {
		if k.IsWrite() && !isLease(k) {
			w += v
		}
	}
	return w
}

// shardCaches measures, in a quiet moment, the heap of a fresh cache of each
// member's shard, of all WebApp bundles, and of none.
func shardCaches(ctx context.Context, cl *cluster, members []string, res *ShardingResult) error {
	empty, _, err := cacheHeap(ctx, cl, labels.SelectorFromSet(labels.Set{"opkit.dev/bench-nothing": "x"}))
	if err != nil {
		return err
	}
	all, _, err := cacheHeap(ctx, cl, nil)
	if err != nil {
		return err
	}
	res.EmptyCacheBytes, res.UnshardedCacheBytes = empty, all
	res.ShardCacheBytes, res.ShardObjects = map[string]float64{}, map[string]int{}
	for _, m := range members {
		h, apps, err := cacheHeap(ctx, cl, labels.SelectorFromSet(labels.Set{sharding.ShardLabel(benchRing): m}))
		if err != nil {
			return err
		}
		res.ShardCacheBytes[m], res.ShardObjects[m] = h, apps
	}
	return nil
}

// cacheHeap starts a cache of the benchmark namespace's WebApps, ConfigMaps,
// Deployments and Services (restricted to sel, if any; managedFields
// stripped), waits for it to sync and returns the live heap it added and how
// many WebApps it holds.
func cacheHeap(ctx context.Context, cl *cluster, sel labels.Selector) (float64, int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	before := liveHeap()
	opts := reconciler.CacheOptions()
	opts.Scheme = cl.scheme
	opts.DefaultNamespaces = map[string]cache.Config{namespace: {}}
	opts.DefaultLabelSelector = sel
	c, err := cache.New(harnessConfig(cl.env.Config), opts)
	if err != nil {
		return 0, 0, err
	}
	for _, obj := range []client.Object{&webappv1.WebApp{}, &corev1.ConfigMap{}, &appsv1.Deployment{}, &corev1.Service{}} {
		if _, err := c.GetInformer(ctx, obj); err != nil {
			return 0, 0, err
		}
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return 0, 0, errors.New("cache did not sync")
	}
	var list webappv1.WebAppList
	if err := c.List(ctx, &list); err != nil {
		return 0, 0, err
	}
	apps := len(list.Items)
	list.Items = nil
	after := liveHeap()
	runtime.KeepAlive(c)
	return after - before, apps, nil
}

func mibMap(m map[string]float64) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = fmt.Sprintf("%.2f", v/(1<<20))
	}
	return out
}

// perShardRatio is the mean shard cache (less the empty cache's fixed cost)
// over the unsharded cache (less the same).
func (r *ShardingResult) perShardRatio() float64 {
	if len(r.ShardCacheBytes) == 0 || r.UnshardedCacheBytes <= r.EmptyCacheBytes {
		return math.NaN()
	}
	sum := 0.0
	for _, v := range r.ShardCacheBytes {
		sum += v - r.EmptyCacheBytes
	}
	return sum / float64(len(r.ShardCacheBytes)) / (r.UnshardedCacheBytes - r.EmptyCacheBytes)
}

// shardingMarkdown writes the report's sharding section.
func shardingMarkdown(b *strings.Builder, sh *ShardingResult) {
	b.WriteString("## Sharding (opkit only)\n\n")
	fmt.Fprintf(b, "%d WebApps, converged by one unsharded opkit replica, are taken over by %d replicas of the sharded webapp operator "+
		"(`examples/sharded/fleet`: a member Lease each, a cache restricted to the member's shard label, the ring's assigner in the "+
		"replica elected for it — here %s, started first). Member Lease duration %s. Then a non-leader stops gracefully "+
		"(Lease released), and another one crashes (stops renewing). A hand-over is complete when every WebApp of the member that left "+
		"is labelled for the member the ring of survivors places it on, is Ready, and has been reconciled by that member since the stop.\n\n",
		sh.N, sh.Replicas, sh.Leader, sh.LeaseDuration)
	if sh.Error != "" {
		fmt.Fprintf(b, "**The scenario did not complete: %s**\n\n", sh.Error)
	}
	b.WriteString("| figure | value |\n|---|---:|\n")
	members := sortedKeys(sh.ShardCacheBytes)
	var spread []string
	for _, m := range sortedKeys(sh.Spread) {
		spread = append(spread, fmt.Sprintf("%s %d", m, sh.Spread[m]))
	}
	fmt.Fprintf(b, "| spread once settled | %s |\n", strings.Join(spread, ", "))
	fmt.Fprintf(b, "| take-over of %d converged WebApps by the fleet (labelled and reconciled by their members) | %.1f s, %d writes (%s per WebApp) |\n",
		sh.N, sh.InitialSeconds, sh.InitialWrites, num(float64(sh.InitialWrites)/float64(max(sh.N, 1))))
	fmt.Fprintf(b, "| heap of one unsharded opkit manager (after GC) | %.2f MiB |\n", sh.UnshardedHeapBytes/(1<<20))
	fmt.Fprintf(b, "| heap of the %d-replica fleet, in total (after GC) | %.2f MiB (%s of unsharded; per replica %.2f MiB, %s) |\n",
		sh.Replicas, sh.FleetHeapBytes/(1<<20), ratio(sh.FleetHeapBytes, sh.UnshardedHeapBytes),
		sh.FleetHeapBytes/float64(sh.Replicas)/(1<<20), ratio(sh.FleetHeapBytes/float64(sh.Replicas), sh.UnshardedHeapBytes))
	fmt.Fprintf(b, "| cache of every WebApp bundle (no selector) | %.2f MiB |\n", sh.UnshardedCacheBytes/(1<<20))
	for _, m := range members {
		fmt.Fprintf(b, "| cache of shard %s (%d WebApps) | %.2f MiB (%s of unsharded) |\n", m, sh.ShardObjects[m], sh.ShardCacheBytes[m]/(1<<20),
			ratio(sh.ShardCacheBytes[m], sh.UnshardedCacheBytes))
	}
	fmt.Fprintf(b, "| fixed cost of the four informers (empty selector) | %.2f MiB |\n", sh.EmptyCacheBytes/(1<<20))
	fmt.Fprintf(b, "| mean shard cache over unsharded, fixed cost removed (even split: %.2f) | %s |\n", 1/float64(max(sh.Replicas, 1)), num(sh.perShardRatio()))
	for _, h := range []struct {
		name string
		h    HandOver
	}{{"graceful", sh.Graceful}, {"ungraceful", sh.Ungraceful}} {
		bound := "none (moves at once)"
		if h.h.Bound > 0 {
			bound = fmt.Sprintf("%.0f s (two lease durations)", h.h.Bound)
		}
		fmt.Fprintf(b, "| %s hand-over of %s's %d WebApps: labelled / reconciled by survivors | %.1f s / %.1f s (bound: %s) |\n",
			h.name, h.h.Member, h.h.Objects, h.h.LabelledSeconds, h.h.Seconds, bound)
		fmt.Fprintf(b, "| %s hand-over: fleet writes (per moved WebApp), failed requests, WebApps not Ready at the end | %d (%s), %s, %d |\n",
			h.name, h.h.Writes, num(float64(h.h.Writes)/float64(max(h.h.Objects, 1))), failures(&Result{Failed: h.h.Failed, FailedTotal: sumValues(h.h.Failed)}), h.h.NotReady)
		if h.h.Error != "" {
			fmt.Fprintf(b, "| %s hand-over error | %s |\n", h.name, h.h.Error)
		}
	}
	fmt.Fprintf(b, "| most replicas inside one WebApp's reconcile at once (guarantee: 1), reconciles seen | %d, %d |\n\n", sh.MaxConcurrent, sh.Reconciles)
	for _, h := range []struct {
		name string
		h    HandOver
	}{{"graceful", sh.Graceful}, {"ungraceful", sh.Ungraceful}} {
		if len(h.h.Requests) == 0 {
			continue
		}
		fmt.Fprintf(b, "Fleet requests during the %s hand-over: ", h.name)
		var parts []string
		for _, k := range sortedKeys(h.h.Requests) {
			parts = append(parts, fmt.Sprintf("%s %d", k, h.h.Requests[k]))
		}
		b.WriteString(strings.Join(parts, ", ") + ".\n\n")
	}
}

// shardMemoryChart: each shard's cache against the unsharded cache (the line).
func shardMemoryChart(sh *ShardingResult) string {
	var labels []string
	var vals []float64
	for _, m := range sortedKeys(sh.ShardCacheBytes) {
		labels = append(labels, m)
		vals = append(vals, sh.ShardCacheBytes[m]/(1<<20))
	}
	return bars(fmt.Sprintf("sharding: cache MiB per shard, %d WebApps over %d replicas", sh.N, sh.Replicas), "MiB", labels, vals,
		sh.UnshardedCacheBytes/(1<<20), "unsharded", "of unsharded")
}

// handOverChart: hand-over seconds against the crash bound (the line).
func handOverChart(sh *ShardingResult) string {
	labels := []string{"graceful", "ungraceful"}
	vals := []float64{sh.Graceful.Seconds, sh.Ungraceful.Seconds}
	return bars(fmt.Sprintf("sharding: hand-over seconds (lease %s)", sh.LeaseDuration), "seconds", labels, vals,
		sh.Ungraceful.Bound, "2× lease", "of 2× lease")
}

func sumValues(m map[int]int) int {
	t := 0
	for _, v := range m {
		t += v
	}
	return t
}
