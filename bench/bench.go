package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	webappv1 "github.com/opkit/opkit/examples/webapp/api/v1"
	"github.com/opkit/opkit/sharding"
	"github.com/opkit/opkit/testenv"
)

// Scenario names, in report order.
const (
	ScenarioConverge = "converge"
	ScenarioRestart  = "restart"
	ScenarioChurn    = "churn"
	ScenarioDelete   = "delete"
)

// Settings are what every contender shares in a run; the report prints them.
type Settings struct {
	// Workers is the reconcile concurrency of both operators
	// (MaxConcurrentReconciles) and the number of workers of the ceiling's
	// raw client loop.
	Workers int `json:"workers"`
	// QPS and Burst are the client rate limits of every contender.
	QPS   float32 `json:"qps"`
	Burst int     `json:"burst"`
	// LoadWorkers is how many concurrent requests the load generator sends.
	LoadWorkers int `json:"loadWorkers"`
	// N is how many WebApps the converge, restart and delete scenarios use.
	N int `json:"n"`
	// ChurnObjects, ChurnRate (spec changes per second) and ChurnDuration
	// shape the spec churn scenario.
	ChurnObjects  int           `json:"churnObjects"`
	ChurnRate     float64       `json:"churnRate"`
	ChurnDuration time.Duration `json:"churnDuration"`
	// Quiet is how long request and reconcile counts must stay unchanged
	// before a scenario's counts are read.
	Quiet time.Duration `json:"quiet"`
	// ShardObjects is how many WebApps the sharding scenario spreads over its
	// replicas; ShardLeaseDuration is their member Leases' duration.
	ShardObjects       int           `json:"shardObjects"`
	ShardLeaseDuration time.Duration `json:"shardLeaseDuration"`
	// RestartRuns is how many times the restart scenario measures each
	// contender (a stop and a fresh start each; the ceiling's LISTs
	// likewise); the run with the median throughput is reported. 0 means 1.
	RestartRuns int `json:"restartRuns,omitempty"`
	// Rounds is how many times the main pass measures the converge and
	// delete scenarios of each contender (0 means 1). Their windows at
	// N = 1,000 are seconds long on a machine whose pace drifts by a
	// fifth within a run, so one measurement per contender ranks
	// contenders by when they ran. Round 1 is the pass as it runs anyway;
	// each further round gives every contender in turn a fresh control
	// plane on which converge and then delete are measured (delete
	// removes the WebApps the measured converge made Ready, as its setup
	// would have), so each round reaches every contender at about the
	// same point of the run (round r starts with the r-th contender, so
	// none is always last). Each contender's converge and delete result
	// is its round with the median throughput (the slower middle one of
	// an even count), every round's throughput beside it. A further pass
	// ([Pass]) measures them once unless its Rounds says otherwise.
	Rounds int `json:"rounds,omitempty"`
}

// Options configure [Run].
type Options struct {
	// Out is the directory for report.md, report.json and the SVG charts.
	Out string
	// Mode names the preset the settings came from ("quick", "default", "full"),
	// for the report.
	Mode     string
	Settings Settings
	// Isolated gives every scenario its own fresh control plane, converging
	// its WebApps first (unmeasured). By default each contender gets one fresh
	// control plane and runs the scenarios as one lifecycle on it: converge,
	// restart, churn, delete, each starting from the state the previous one left.
	Isolated bool
	// Contenders and Scenarios select a subset (default: all, in report order).
	Contenders []string
	Scenarios  []string
	// Log receives progress lines (default: discarded).
	Log io.Writer
	// HeapProfiles, when set, is a directory where the restart scenario
	// writes a heap profile of the process (heap-<contender>-<N>.pprof) right
	// after measuring each contender's live heap, while its manager still
	// runs: what its cache and indexes hold.
	HeapProfiles string
	// Passes are further runs of the same scenarios at other sizes, after the
	// main one (at Settings.N): each contender of a pass gets one fresh
	// control plane on which the scenarios run as a lifecycle (chained,
	// whatever Isolated says), to keep large sizes within an hour. Their
	// results carry the pass's Size; the report adds a headline table per
	// size and the scaling curve across all sizes.
	Passes []Pass
	// PhaseProfiles, when set, is a directory where every measured phase
	// writes the CPU profile its contender CPU figure was read from
	// (cpu-<scenario>-<contender>-<N>.pprof): the whole process during that
	// phase only, each sample labelled with the contender whose goroutine
	// ran (pprof -tagfocus contender=NAME) — and the kube-apiserver's CPU
	// profile over the same phase (cpu-apiserver-<scenario>-<contender>-<N>.pprof,
	// consecutive 1 s profiles from its /debug/pprof/profile merged, the last
	// running up to 1 s past the phase). With rounds, each round's profiles
	// replace the previous round's. The server's profiler adds its own small
	// cost to the control-plane CPU figure.
	PhaseProfiles string
}

// Pass is one more run of the scenarios with N WebApps.
type Pass struct {
	// N is how many WebApps the pass's converge, restart and delete use.
	N int `json:"n"`
	// Contenders run in the pass (nil: all of the run's contenders); a
	// contender the run does not select is skipped.
	Contenders []string `json:"contenders,omitempty"`
	// Rounds is how many rounds the pass measures converge and delete in,
	// as Settings.Rounds does for the main pass (0 or 1: once): after the
	// pass's contenders ran their scenarios, each further round gives every
	// one of them in turn a fresh control plane for a measured converge and
	// delete of N WebApps, and each reports its median round.
	Rounds int `json:"rounds,omitempty"`
}

// FullPasses are the passes of a full run after its main N = 1,000 pass:
// every contender at 5,000 WebApps, converge and delete in 3 rounds (a
// single measurement at 5,000 has ranked the same two contenders both ways
// in two runs of the same code), then opkit alone at 20,000, measured once.
func FullPasses() []Pass {
	return []Pass{{N: 5000, Rounds: 3}, {N: 20000, Contenders: []string{Opkit}}}
}

// Quick is the preset of a quick run (CI smoke, under 3 minutes).
func Quick() Settings {
	return Settings{Workers: 4, QPS: 500, Burst: 1000, LoadWorkers: 8, N: 100, ChurnObjects: 20, ChurnRate: 10, ChurnDuration: 4 * time.Second, Quiet: time.Second,
		ShardObjects: 100, ShardLeaseDuration: 2 * time.Second}
}

// Default is the preset of a default run: every contender, restart
// measured three times, converge and delete in three rounds (on 2 cores on
// 2026-12-03: converge, restart and delete alone took 14 minutes 39 seconds;
// churn and sharding add about 5 minutes, a pass at 5,000 about 18).
func Default() Settings {
	return Settings{Workers: 4, QPS: 500, Burst: 1000, LoadWorkers: 8, N: 1000, ChurnObjects: 200, ChurnRate: 20, ChurnDuration: 20 * time.Second, Quiet: 2 * time.Second,
		ShardObjects: 1000, ShardLeaseDuration: sharding.DefaultLeaseDuration, RestartRuns: 3, Rounds: 3}
}

// Full is the preset of a full run's main pass: Default's settings (1,000
// WebApps); the larger sizes come from [FullPasses].
func Full() Settings {
	return Default()
}

// Result is one contender's figures in one scenario.
type Result struct {
	Scenario  string `json:"scenario"`
	Contender string `json:"contender"`
	// N is how many objects (or spec changes) the measured phase covered.
	N int `json:"n"`
	// Size is the WebApp count of the pass that measured this result
	// (Settings.N for the main pass, a [Pass]'s N otherwise).
	Size int `json:"size"`
	// Converged: every expected object reached the expected state in time.
	Converged   bool   `json:"converged"`
	Outstanding int    `json:"outstanding,omitempty"`
	Error       string `json:"error,omitempty"`
	// Seconds is the measured window; Throughput is N (or reconciles) per second of it.
	Seconds    float64 `json:"seconds"`
	Throughput float64 `json:"throughput"`
	// RunThroughputs is every run's throughput, in run order, when the
	// scenario was measured more than once (restart: Settings.RestartRuns;
	// converge and delete: Settings.Rounds) and this result is the median
	// run's.
	RunThroughputs []float64 `json:"runThroughputs,omitempty"`
	Unit           string    `json:"unit"`
	// Requests counts the contender's API requests ("verb resource") during
	// the measured phase, from testenv.CountRequests.
	Requests map[string]int `json:"requests"`
	ByVerb   map[string]int `json:"byVerb"`
	Total    int            `json:"total"`
	// Writes are the requests that change state (create, update, patch,
	// delete), dry-runs excluded; DryRuns counts the dry-run requests (the
	// flux contender's server-side dry-run applies), which are in Requests
	// and ByVerb under their verb.
	Writes  int `json:"writes"`
	DryRuns int `json:"dryRuns,omitempty"`
	// LiveGets are GET requests for API resources (discovery excluded): reads
	// that bypassed the cache.
	LiveGets int `json:"liveGets"`
	// Reconciles is the controller's reconcile count during the phase (NaN
	// for the ceiling; ReconcileCount carries it in JSON, which has no NaN).
	Reconciles     float64  `json:"-"`
	ReconcileCount *float64 `json:"reconciles,omitempty"`
	// Failed counts responses with status >= 400 (0: transport error) by code.
	Failed      map[int]int `json:"failed,omitempty"`
	FailedTotal int         `json:"failedTotal"`
	LoadErrors  int         `json:"loadErrors,omitempty"`
	// Latencies (create or spec change to Ready for its generation, or delete to gone), sorted.
	Latencies []time.Duration `json:"latencies,omitempty"`
	P50       time.Duration   `json:"p50"`
	P99       time.Duration   `json:"p99"`
	Max       time.Duration   `json:"max"`
	// HeapBytes is the live heap the contender's manager added (restart only).
	HeapBytes float64 `json:"heapBytes,omitempty"`
	// StoredBytes is the JSON size of the WebApps and children the contender
	// left, as the API server returns them (restart only).
	StoredBytes  float64 `json:"storedBytes,omitempty"`
	SetupSeconds float64 `json:"setupSeconds,omitempty"`
	// SyncSeconds (restart only) is the part of Seconds until the new
	// manager's caches had synced — its LISTs (or watch-lists), decoding and
	// transforms, before any reconcile; for the ceiling, its LISTs (all of
	// Seconds).
	SyncSeconds float64 `json:"syncSeconds,omitempty"`
	// CPUSeconds is the CPU the contender's own goroutines used during the
	// measured phase (until quiet), from its pprof label (cpu.go); nil when
	// the CPU profiler was in use by someone else. ProcessCPUSeconds is the
	// whole process's (contender and harness) over the same window, from
	// getrusage.
	CPUSeconds        *float64 `json:"cpuSeconds,omitempty"`
	ProcessCPUSeconds float64  `json:"processCpuSeconds"`
	// ControlPlaneCPUSeconds is the CPU kube-apiserver and etcd used over
	// the same window (/proc, 10 ms resolution): what the contender's
	// requests and watches cost the server, beside everything else the
	// phase asked of it (the load generator's writes, the harness's
	// watches), which is the same for every contender. Nil when their
	// processes were not found.
	ControlPlaneCPUSeconds *float64 `json:"controlPlaneCpuSeconds,omitempty"`
}

// setCPU records a phase's CPU figures.
func (r *Result) setCPU(f cpuFigures) {
	r.ProcessCPUSeconds = f.process
	if !math.IsNaN(f.contender) {
		r.CPUSeconds = ptr.To(f.contender)
	}
	if !math.IsNaN(f.controlPlane) {
		r.ControlPlaneCPUSeconds = ptr.To(f.controlPlane)
	}
}

// ControlPlaneCPU is ControlPlaneCPUSeconds, or NaN when it was not
// measured.
func (r *Result) ControlPlaneCPU() float64 {
	if r.ControlPlaneCPUSeconds == nil {
		return math.NaN()
	}
	return *r.ControlPlaneCPUSeconds
}

// CPU is CPUSeconds, or NaN when it was not measured.
func (r *Result) CPU() float64 {
	if r.CPUSeconds == nil {
		return math.NaN()
	}
	return *r.CPUSeconds
}

// PerObject divides v by N (NaN when N is zero).
func (r *Result) PerObject(v float64) float64 {
	if r.N == 0 {
		return math.NaN()
	}
	return v / float64(r.N)
}

// Report is a whole run.
type Report struct {
	Date     time.Time     `json:"date"`
	Took     time.Duration `json:"took"`
	Mode     string        `json:"mode"`
	Isolated bool          `json:"isolated"`
	Machine  Machine       `json:"machine"`
	Settings Settings      `json:"settings"`
	Results  []*Result     `json:"results"`
	// Sizes are the passes' WebApp counts, the main pass's first.
	Sizes []int `json:"sizes"`
	// Passes are the further passes as Options named them.
	Passes []Pass `json:"passes,omitempty"`
	// Sharding is the sharding scenario (opkit only), when it ran.
	Sharding *ShardingResult `json:"sharding,omitempty"`
}

// Find returns the result of contender in scenario of the main pass, or nil.
func (r *Report) Find(scenario, contender string) *Result {
	return r.FindAt(scenario, contender, r.Settings.N)
}

// FindAt returns the result of contender in scenario of the pass with size
// WebApps, or nil. A result without a size (a report written before passes
// existed) belongs to the main pass.
func (r *Report) FindAt(scenario, contender string, size int) *Result {
	for _, res := range r.Results {
		rs := res.Size
		if rs == 0 {
			rs = r.Settings.N
		}
		if res.Scenario == scenario && res.Contender == contender && rs == size {
			return res
		}
	}
	return nil
}

// Run runs every selected scenario for every selected contender, each on a
// fresh control plane, writes the report and charts to o.Out, and returns
// the report. A contender that does not converge is reported as such, not
// as an error; errors are for a run that could not take place.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Settings.N == 0 {
		o.Settings = Default()
	}
	if len(o.Contenders) == 0 {
		o.Contenders = slices.Clone(contenders)
	}
	if len(o.Scenarios) == 0 {
		o.Scenarios = []string{ScenarioConverge, ScenarioRestart, ScenarioChurn, ScenarioDelete, ScenarioSharding}
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Out == "" {
		return nil, errors.New("bench: no output directory")
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	if o.PhaseProfiles != "" {
		if err := os.MkdirAll(o.PhaseProfiles, 0o755); err != nil {
			return nil, err
		}
	}
	rep := &Report{Date: time.Now().UTC(), Mode: o.Mode, Isolated: o.Isolated, Settings: o.Settings, Machine: describeMachine(), Sizes: []int{o.Settings.N}}
	for _, p := range o.Passes {
		if p.N <= 0 || slices.Contains(rep.Sizes, p.N) {
			return nil, fmt.Errorf("bench: pass of %d WebApps: sizes must be positive and distinct (main pass: %d)", p.N, o.Settings.N)
		}
		for _, c := range p.Contenders {
			if !slices.Contains(contenders, c) {
				return nil, fmt.Errorf("bench: pass of %d WebApps: unknown contender %q", p.N, c)
			}
		}
		rep.Sizes = append(rep.Sizes, p.N)
	}
	rep.Passes = o.Passes
	start := time.Now()
	sharded := slices.Contains(o.Scenarios, ScenarioSharding) && slices.Contains(o.Contenders, Opkit)
	o.Scenarios = slices.DeleteFunc(slices.Clone(o.Scenarios), func(sc string) bool { return sc == ScenarioSharding })
	if o.Isolated {
		for _, sc := range o.Scenarios {
			for _, name := range o.Contenders {
				if err := runOn(ctx, o, rep, name, []string{sc}); err != nil {
					return rep, err
				}
			}
		}
	} else if len(o.Scenarios) > 0 {
		for _, name := range o.Contenders {
			if err := runOn(ctx, o, rep, name, o.Scenarios); err != nil {
				return rep, err
			}
		}
	}
	if sharded {
		res, err := runSharding(ctx, o)
		if err != nil {
			return rep, fmt.Errorf("%s: %w", ScenarioSharding, err)
		}
		rep.Sharding = res
	}
	order := map[string]int{}
	for i, sc := range o.Scenarios {
		order[sc] = i * 10
	}
	for i, c := range o.Contenders {
		order[c] = i
	}
	sizeOrder := func(n int) int { return slices.Index(rep.Sizes, n) * 1000 }
	// finish sorts the results and writes the report so far: after the main
	// pass and again after each contender of a further pass, so a long run
	// stopped half way still leaves what it measured.
	finish := func() error {
		sort.SliceStable(rep.Results, func(i, j int) bool {
			a, b := rep.Results[i], rep.Results[j]
			return sizeOrder(a.Size)+order[a.Scenario]+order[a.Contender] < sizeOrder(b.Size)+order[b.Scenario]+order[b.Contender]
		})
		rep.Took = time.Since(start)
		return write(rep, o.Out)
	}
	if err := moreRounds(ctx, o, rep, o.Contenders, o.Settings.Rounds); err != nil {
		return rep, err
	}
	if err := finish(); err != nil {
		return rep, err
	}
	for _, p := range o.Passes {
		if len(o.Scenarios) == 0 {
			break
		}
		po := o
		po.Settings.N = p.N
		var names []string
		for _, name := range o.Contenders {
			if p.Contenders != nil && !slices.Contains(p.Contenders, name) {
				continue
			}
			names = append(names, name)
			if err := runOn(ctx, po, rep, name, o.Scenarios); err != nil {
				return rep, err
			}
			if err := finish(); err != nil {
				return rep, err
			}
		}
		if err := moreRounds(ctx, po, rep, names, p.Rounds); err != nil {
			return rep, err
		}
		if err := finish(); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// roundScenarios are the scenarios Settings.Rounds repeats, in the order a
// round runs them.
var roundScenarios = []string{ScenarioConverge, ScenarioDelete}

// moreRounds runs rounds 2 to rounds of converge and delete (those of
// o.Scenarios) at o.Settings.N, each of contenders in turn on a fresh
// control plane each (round r from the r-th contender on), and then
// replaces each contender's results of a repeated scenario at that size by
// its median round (medianRun).
func moreRounds(ctx context.Context, o Options, rep *Report, contenders []string, rounds int) error {
	scenarios := slices.DeleteFunc(slices.Clone(roundScenarios), func(sc string) bool { return !slices.Contains(o.Scenarios, sc) })
	if rounds <= 1 || len(scenarios) == 0 || len(contenders) == 0 {
		return nil
	}
	for round := 2; round <= rounds; round++ {
		logf(o.Log, "== round %d of %d at N = %d: %s", round, rounds, o.Settings.N, strings.Join(scenarios, ", "))
		// Each round starts one contender further down the list, so no
		// contender is always the last of a round.
		k := (round - 1) % len(contenders)
		for _, name := range append(slices.Clone(contenders[k:]), contenders[:k]...) {
			if err := runOn(ctx, o, rep, name, scenarios); err != nil {
				return err
			}
		}
	}
	rep.Results = medianRounds(rep.Results)
	return nil
}

// medianRounds replaces every group of results of one scenario, contender
// and size by its median run (medianRun), at the group's first position.
func medianRounds(results []*Result) []*Result {
	type key struct {
		scenario, contender string
		size                int
	}
	groups := map[key][]*Result{}
	var order []key
	for _, r := range results {
		k := key{r.Scenario, r.Contender, r.Size}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	out := make([]*Result, 0, len(order))
	for _, k := range order {
		out = append(out, medianRun(groups[k]))
	}
	return out
}

func logf(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func (r *Result) summary() string {
	s := fmt.Sprintf("converged=%v n=%d %.1f %s in %.1fs writes/obj=%.2f", r.Converged, r.N, r.Throughput, r.Unit, r.Seconds, r.PerObject(float64(r.Writes)))
	if !math.IsNaN(r.Reconciles) {
		s += fmt.Sprintf(" reconciles/obj=%.2f", r.PerObject(r.Reconciles))
	}
	if r.P99 > 0 {
		s += fmt.Sprintf(" p50=%s p99=%s", r.P50.Round(time.Millisecond), r.P99.Round(time.Millisecond))
	}
	if r.HeapBytes != 0 {
		s += fmt.Sprintf(" heap/1000=%.1fMiB", r.HeapBytes/float64(r.N)*1000/(1<<20))
	}
	if r.CPUSeconds != nil {
		s += fmt.Sprintf(" cpu/obj=%.1fms (process %.1fms)", 1000*r.PerObject(*r.CPUSeconds), 1000*r.PerObject(r.ProcessCPUSeconds))
	}
	if r.ControlPlaneCPUSeconds != nil {
		s += fmt.Sprintf(" control-plane cpu/obj=%.1fms", 1000*r.PerObject(*r.ControlPlaneCPUSeconds))
	}
	if r.FailedTotal > 0 {
		s += fmt.Sprintf(" failed=%d", r.FailedTotal)
	}
	if r.Error != "" {
		s += " error=" + r.Error
	}
	return s
}

// runOn starts a fresh control plane and runs scenarios, in order, for one
// contender on it.
func runOn(ctx context.Context, o Options, rep *Report, contender string, scenarios []string) (err error) {
	// What the contenders before this one left in the process: a
	// contender that does not stop all it started would slow every later
	// one, so the log shows it.
	logf(o.Log, "== %s: fresh control plane for %s (N = %d; process before it: %d goroutines, live heap %.1f MiB)",
		contender, strings.Join(scenarios, ", "), o.Settings.N, runtime.NumGoroutine(), liveHeap()/(1<<20))
	cl, err := startCluster(ctx)
	if err != nil {
		return err
	}
	if rep.Machine.Kubernetes == "" {
		rep.Machine.Kubernetes = cl.version
	}
	r := &runner{o: o, cl: cl, contender: contender}
	defer func() {
		err = errors.Join(err, r.stopInstance(), cl.stop())
	}()
	for _, sc := range scenarios {
		step, ok := map[string]func(context.Context) (*Result, error){
			ScenarioConverge: r.converge, ScenarioRestart: r.restart, ScenarioChurn: r.churn, ScenarioDelete: r.delete,
		}[sc]
		if !ok {
			return fmt.Errorf("unknown scenario %q", sc)
		}
		r.scenario = sc
		res, err := step(ctx)
		if err != nil {
			return fmt.Errorf("%s/%s: %w", sc, contender, err)
		}
		res.Scenario, res.Contender, res.Size = sc, contender, o.Settings.N
		logf(o.Log, "   %-8s %-8s %s", sc, contender, res.summary())
		rep.Results = append(rep.Results, res)
	}
	return nil
}

type runner struct {
	o         Options
	cl        *cluster
	contender string
	scenario  string
	inst      instance
	// have is how many WebApps (app-00000 on) exist and were Ready.
	have int
}

func (r *runner) start(ctx context.Context) error {
	inst, err := startContender(ctx, r.contender, r.cl, r.o.Settings)
	if err != nil {
		return err
	}
	r.inst = inst
	return nil
}

func (r *runner) stopInstance() error {
	if r.inst == nil {
		return nil
	}
	err := r.inst.stop()
	r.inst = nil
	return err
}

func appName(i int) string { return fmt.Sprintf("app-%05d", i) }

func newApp(name string) *webappv1.WebApp {
	return &webappv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: webappv1.WebAppSpec{
			Image: "nginx:1.27", Replicas: ptr.To[int32](1), Port: 8080,
			Config: map[string]string{"greeting": "hello"}, Headless: true,
		},
	}
}

// parallel runs fn for 0..n-1 on workers goroutines and returns how many failed.
func parallel(ctx context.Context, workers, n int, fn func(ctx context.Context, i int) error) int {
	var failed int
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(ctx, i); err != nil {
					mu.Lock()
					failed++
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	return failed
}

func convergeTimeout(n int) time.Duration {
	return max(90*time.Second, time.Duration(n)*200*time.Millisecond)
}

// phase measures one phase: it resets the counters, runs act, waits for the
// tracker, then for quiet, and fills a Result.
func (r *runner) phase(ctx context.Context, n int, unit string, timeout time.Duration, act func(ctx context.Context) int) *Result {
	req, fail := r.inst.requests(), r.inst.failures()
	req.Reset()
	fail.reset()
	r.cl.tracker.reset()
	rec0 := r.inst.reconciles()
	cpu := r.startCPU()
	start := time.Now()
	loadErrs := act(ctx)
	logf(r.o.Log, "   load sent in %s", time.Since(start).Round(time.Millisecond))
	left := r.cl.tracker.wait(ctx, timeout)
	lat, last := r.cl.tracker.results()
	if last.IsZero() {
		last = time.Now()
	}
	r.settle(ctx)
	cpuFig := cpu.stop(r.contender)
	res := &Result{N: n, Converged: left == 0 && loadErrs == 0, Outstanding: left, LoadErrors: loadErrs, Unit: unit, Latencies: lat}
	res.Seconds = last.Sub(start).Seconds()
	if res.Seconds > 0 {
		res.Throughput = float64(len(lat)) / res.Seconds
	}
	res.Reconciles = r.inst.reconciles() - rec0
	res.setCPU(cpuFig)
	fillRequests(res, req, fail)
	fillLatencies(res)
	return res
}

// settle waits until the contender's request and reconcile counts have not
// moved for Quiet (at most 30s), so trailing reconciles are counted.
func (r *runner) settle(ctx context.Context) {
	deadline := time.Now().Add(30 * time.Second)
	lastTotal, lastRec := -1, math.NaN()
	stable := time.Now()
	for time.Now().Before(deadline) && ctx.Err() == nil {
		total, rec := r.inst.requests().Total(), r.inst.reconciles()
		if total != lastTotal || !sameFloat(rec, lastRec) {
			lastTotal, lastRec, stable = total, rec, time.Now()
		} else if time.Since(stable) >= r.o.Settings.Quiet {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func sameFloat(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }

func fillRequests(res *Result, req *testenv.RequestCounter, fail *failureCounter) {
	res.Requests, res.ByVerb = map[string]int{}, map[string]int{}
	for k, v := range req.Snapshot() {
		res.Requests[k.String()] += v
		res.ByVerb[k.Verb] += v
		res.Total += v
		if k.IsWrite() {
			res.Writes += v
		}
		if k.Verb == "get" && !strings.HasPrefix(k.Resource, "/") {
			res.LiveGets += v
		}
	}
	res.DryRuns = fail.dryRunCount()
	res.Writes -= res.DryRuns
	res.Failed = fail.snapshot()
	for _, v := range res.Failed {
		res.FailedTotal += v
	}
}

func fillLatencies(res *Result) {
	res.P50, res.P99 = percentile(res.Latencies, 0.50), percentile(res.Latencies, 0.99)
	if n := len(res.Latencies); n > 0 {
		res.Max = res.Latencies[n-1]
	}
}

// percentile of sorted durations, nearest rank.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// createAll is the load generator: it creates n WebApps with LoadWorkers
// concurrent requests, each registered with the tracker first.
func (r *runner) createAll(ctx context.Context, from, to int) int {
	return parallel(ctx, r.o.Settings.LoadWorkers, to-from, func(ctx context.Context, i int) error {
		app := newApp(appName(from + i))
		r.cl.tracker.expect(app.Name, 1, time.Now())
		if err := r.cl.admin.Create(ctx, app); err != nil {
			r.cl.tracker.forget(app.Name)
			return err
		}
		r.inst.created(app)
		return nil
	})
}

// converge: create N WebApps; CR/s from the first create to the last Ready.
func (r *runner) converge(ctx context.Context) (*Result, error) {
	if r.have > 0 {
		return nil, errors.New("converge must run first on a control plane")
	}
	if r.inst == nil {
		if err := r.start(ctx); err != nil {
			return nil, err
		}
	}
	n := r.o.Settings.N
	res := r.phase(ctx, n, "CR/s", convergeTimeout(n), func(ctx context.Context) int { return r.createAll(ctx, 0, n) })
	if res.Converged {
		r.have = n
	}
	return res, nil
}

// ensure makes sure the contender runs and at least n WebApps exist and were
// Ready, converging the missing ones with the contender itself (so that what
// exists is exactly what that contender writes). It returns how long that
// took; it is not measured otherwise.
func (r *runner) ensure(ctx context.Context, n int) (float64, error) {
	if r.inst == nil {
		if err := r.start(ctx); err != nil {
			return 0, err
		}
	}
	if r.have >= n {
		return 0, nil
	}
	logf(r.o.Log, "   setup: %s converges %d WebApps", r.contender, n-r.have)
	t0 := time.Now()
	res := r.phase(ctx, n-r.have, "CR/s", convergeTimeout(n), func(ctx context.Context) int { return r.createAll(ctx, r.have, n) })
	if !res.Converged {
		return 0, fmt.Errorf("setup: %d of %d WebApps did not become Ready", res.Outstanding, n-r.have)
	}
	r.have = n
	return time.Since(t0).Seconds(), nil
}

// restart: with N converged WebApps, stop the contender and start a new
// manager; count its requests until its reconciles stop, and the live heap
// its manager added. The ceiling is what any restart must do: LIST the four
// kinds once. A restart's measured window is a few hundred milliseconds at
// 1,000 WebApps, where a scheduling hiccup on a shared 2-core machine moves
// the figure by a third: each contender (the ceiling too) is measured
// Settings.RestartRuns times, a stop and a fresh start each, and the run
// with the median throughput is reported, every run's throughput beside it.
func (r *runner) restart(ctx context.Context) (_ *Result, err error) {
	n := r.o.Settings.N
	setupSeconds, err := r.ensure(ctx, n)
	if err != nil {
		return failed(n, err), nil
	}
	n = r.have
	stored, err := r.storedBytes(ctx)
	if err != nil {
		return nil, err
	}
	if err := r.stopInstance(); err != nil {
		return nil, err
	}
	// Nothing else of the harness holds objects during the measurement.
	r.cl.stopHelpers()
	defer func() { err = errors.Join(err, r.cl.startHelpers(ctx)) }()
	var runs []*Result
	count := max(1, r.o.Settings.RestartRuns)
	for i := range count {
		if i > 0 {
			if err := r.stopInstance(); err != nil {
				return nil, err
			}
		}
		if count > 1 {
			logf(r.o.Log, "   restart run %d of %d", i+1, count)
		}
		var res *Result
		if r.contender == Ceiling {
			res, err = r.listCeiling(ctx, n, setupSeconds)
		} else {
			res, err = r.restartOnce(ctx, n, setupSeconds)
		}
		if err != nil {
			return nil, err
		}
		res.StoredBytes = stored
		runs = append(runs, res)
	}
	return medianRun(runs), nil
}

// medianRun returns the run with the median throughput (the lower middle
// one of an even count), with every run's throughput in run order.
func medianRun(runs []*Result) *Result {
	sorted := slices.Clone(runs)
	slices.SortStableFunc(sorted, func(a, b *Result) int { return cmp.Compare(a.Throughput, b.Throughput) })
	med := sorted[(len(sorted)-1)/2]
	if len(runs) > 1 {
		med.RunThroughputs = make([]float64, len(runs))
		for i, run := range runs {
			med.RunThroughputs[i] = run.Throughput
		}
	}
	return med
}

// restartOnce starts the stopped contender once and measures that start.
func (r *runner) restartOnce(ctx context.Context, n int, setupSeconds float64) (*Result, error) {
	heap0 := liveHeap()
	// Counted before the start: the new manager's first reconciles may come
	// before start returns. The stopped instance's count is final.
	base := reconcileTotal(controllerName(r.contender))
	cpu := r.startCPU()
	start := time.Now()
	if err := r.start(ctx); err != nil {
		cpu.stop(r.contender)
		return nil, err
	}
	synced := time.Since(start)
	last, lastChange := base, time.Now()
	deadline := time.Now().Add(convergeTimeout(n))
	var first time.Duration
	for time.Now().Before(deadline) && ctx.Err() == nil {
		cur := r.inst.reconciles()
		if cur != last {
			if last == base {
				first = time.Since(start)
			}
			last, lastChange = cur, time.Now()
		}
		if cur-base >= float64(n) && time.Since(lastChange) >= r.o.Settings.Quiet {
			break
		}
		// The end of the reconciles is known to this poll's period (a
		// read of the reconcile counter, a few microseconds of CPU):
		// 10ms on a phase of a few hundred.
		time.Sleep(10 * time.Millisecond)
	}
	r.settle(ctx)
	cpuFig := cpu.stop(r.contender)
	heap := liveHeap() - heap0
	logf(r.o.Log, "   restart: caches synced at %dms, reconciles seen from %dms (10ms polls) to %dms; heap %.1f MiB per 1,000",
		synced.Milliseconds(), first.Milliseconds(), lastChange.Sub(start).Milliseconds(), heap/float64(n)*1000/(1<<20))
	if r.o.HeapProfiles != "" {
		if err := writeHeapProfile(filepath.Join(r.o.HeapProfiles, fmt.Sprintf("heap-%s-%d.pprof", r.contender, r.o.Settings.N))); err != nil {
			return nil, err
		}
	}
	res := &Result{N: n, Unit: "reconciles/s", SetupSeconds: setupSeconds, HeapBytes: heap, SyncSeconds: synced.Seconds()}
	res.setCPU(cpuFig)
	res.Reconciles = r.inst.reconciles() - base
	res.Converged = res.Reconciles >= float64(n)
	if !res.Converged {
		res.Outstanding = n - int(res.Reconciles)
	}
	res.Seconds = lastChange.Sub(start).Seconds()
	if res.Seconds > 0 {
		res.Throughput = res.Reconciles / res.Seconds
	}
	fillRequests(res, r.inst.requests(), r.inst.failures())
	return res, nil
}

// storedBytes sums the JSON size of every object of the four kinds in the
// benchmark namespace, managedFields included, as an informer caches them.
func (r *runner) storedBytes(ctx context.Context) (float64, error) {
	total := 0
	for _, l := range []client.ObjectList{&webappv1.WebAppList{}, &corev1.ConfigMapList{}, &appsv1.DeploymentList{}, &corev1.ServiceList{}} {
		if err := r.cl.admin.List(ctx, l, client.InNamespace(namespace)); err != nil {
			return 0, err
		}
		items, err := apimeta.ExtractList(l)
		if err != nil {
			return 0, err
		}
		for _, item := range items {
			data, err := json.Marshal(item)
			if err != nil {
				return 0, err
			}
			total += len(data)
		}
	}
	return float64(total), nil
}

func (r *runner) listCeiling(ctx context.Context, n int, setupSeconds float64) (*Result, error) {
	if err := r.start(ctx); err != nil {
		return nil, err
	}
	ceil := r.inst.(*ceiling)
	cpu := r.startCPU()
	start := time.Now()
	var errs []error
	// What an informer's initial list costs: served from the watch cache.
	opts := &client.ListOptions{Namespace: namespace, Raw: &metav1.ListOptions{ResourceVersion: "0"}}
	labelled(ctx, Ceiling, func(ctx context.Context) {
		for _, l := range []client.ObjectList{&webappv1.WebAppList{}, &corev1.ConfigMapList{}, &appsv1.DeploymentList{}, &corev1.ServiceList{}} {
			errs = append(errs, ceil.c.List(ctx, l, opts))
		}
	})
	took := time.Since(start)
	cpuFig := cpu.stop(Ceiling)
	res := &Result{N: n, Unit: "objects/s", Seconds: took.Seconds(), Throughput: float64(n) / took.Seconds(), SetupSeconds: setupSeconds, Reconciles: math.NaN(), SyncSeconds: took.Seconds()}
	res.setCPU(cpuFig)
	if err := errors.Join(errs...); err != nil {
		res.Error = err.Error()
	}
	res.Converged = res.Error == ""
	fillRequests(res, r.inst.requests(), r.inst.failures())
	return res, nil
}

func failed(n int, err error) *Result {
	return &Result{N: n, Error: err.Error(), Reconciles: math.NaN(), Outstanding: n}
}

// writeHeapProfile writes the process's heap profile (after a collection)
// to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC()
	return errors.Join(pprof.Lookup("heap").WriteTo(f, 0), f.Close())
}

// liveHeap is the heap in use after two full collections.
func liveHeap() float64 {
	runtime.GC()
	debug.FreeOSMemory()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc)
}

// churn: with ChurnObjects converged WebApps, change one spec at ChurnRate
// per second, round robin, for ChurnDuration; latency is from the change to
// Ready for the new generation.
func (r *runner) churn(ctx context.Context) (*Result, error) {
	s := r.o.Settings
	changes := int(s.ChurnRate * s.ChurnDuration.Seconds())
	setupSeconds, err := r.ensure(ctx, s.ChurnObjects)
	if err != nil {
		return failed(changes, err), nil
	}
	r.settle(ctx)
	gens := make([]int64, s.ChurnObjects)
	var list webappv1.WebAppList
	if err := r.cl.admin.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	for _, app := range list.Items {
		var i int
		if _, err := fmt.Sscanf(app.Name, "app-%d", &i); err == nil && i < len(gens) {
			gens[i] = app.Generation
		}
	}
	res := r.phase(ctx, changes, "changes/s", 90*time.Second, func(ctx context.Context) int {
		tick := time.NewTicker(time.Duration(float64(time.Second) / s.ChurnRate))
		defer tick.Stop()
		var wg sync.WaitGroup
		var mu sync.Mutex
		errs := 0
		for i := range changes {
			if i > 0 {
				select {
				case <-ctx.Done():
					return errs + changes - i
				case <-tick.C:
				}
			}
			k := i % s.ChurnObjects
			gens[k]++
			name, gen := appName(k), gens[k]
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := r.change(ctx, name, gen, i); err != nil {
					mu.Lock()
					errs++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		return errs
	})
	res.SetupSeconds = setupSeconds
	return res, nil
}

func (r *runner) change(ctx context.Context, name string, gen int64, rev int) error {
	r.cl.tracker.expect(name, gen, time.Now())
	app := &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	data, err := json.Marshal(map[string]any{"spec": map[string]any{"config": map[string]string{"rev": strconv.Itoa(rev)}}})
	if err != nil {
		return err
	}
	if err := r.cl.admin.Patch(ctx, app, client.RawPatch(types.MergePatchType, data)); err != nil {
		r.cl.tracker.forgetGen(name, gen)
		return err
	}
	if app.Generation != gen {
		r.cl.tracker.forgetGen(name, gen)
		return fmt.Errorf("%s: generation %d after the change, want %d", name, app.Generation, gen)
	}
	r.inst.changed(app)
	return nil
}

// delete: with N converged WebApps (each with the finalizer), delete them
// all; CR/s from the first delete to the last one gone.
func (r *runner) delete(ctx context.Context) (*Result, error) {
	n := r.o.Settings.N
	setupSeconds, err := r.ensure(ctx, n)
	if err != nil {
		return failed(n, err), nil
	}
	n = r.have
	r.settle(ctx)
	res := r.phase(ctx, n, "CR/s", convergeTimeout(n), func(ctx context.Context) int {
		return parallel(ctx, r.o.Settings.LoadWorkers, n, func(ctx context.Context, i int) error {
			name := appName(i)
			r.cl.tracker.expectGone(name, time.Now())
			app := &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
			if err := r.cl.admin.Delete(ctx, app); err != nil {
				r.cl.tracker.forget(name)
				return err
			}
			r.inst.deleting(name)
			return nil
		})
	})
	r.have = 0
	res.SetupSeconds = setupSeconds
	return res, nil
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Render rewrites report.md and the charts in dir from its report.json, as
// the version of this package that runs it would have written them: a
// figure or table added since the run was measured appears where the
// run's results hold what it needs (n/a where they do not). report.json is
// read, not written.
func Render(dir string) (*Report, error) {
	data, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		return nil, err
	}
	rep := &Report{}
	if err := json.Unmarshal(data, rep); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "report.json"), err)
	}
	for _, res := range rep.Results {
		res.Reconciles = math.NaN()
		if res.ReconcileCount != nil {
			res.Reconciles = *res.ReconcileCount
		}
	}
	return rep, writeMarkdown(rep, dir)
}

func write(rep *Report, dir string) error {
	for _, res := range rep.Results {
		if !math.IsNaN(res.Reconciles) {
			res.ReconcileCount = ptr.To(res.Reconciles)
		}
	}
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), data, 0o644); err != nil {
		return err
	}
	return writeMarkdown(rep, dir)
}

// writeMarkdown writes rep's charts and report.md into dir.
func writeMarkdown(rep *Report, dir string) error {
	charts, err := writeCharts(rep, dir)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "report.md"), []byte(markdown(rep, charts)), 0o644)
}
