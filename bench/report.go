package bench

import (
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// color is each contender's color in every chart.
func color(contender string) string {
	switch contender {
	case Ceiling:
		return "#7f7f7f"
	case Baseline:
		return "#d95f02"
	case Flux:
		return "#7570b3"
	}
	return "#1b9e77"
}

// ratio formats a/b, or "n/a".
func ratio(a, b float64) string {
	if math.IsNaN(a) || math.IsNaN(b) || b == 0 || a == 0 && b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func num(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "n/a"
	case v == math.Trunc(v) && math.Abs(v) < 1e6:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func ms(d time.Duration) string {
	if d == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
}

// metric extracts one figure from a result (NaN when it does not apply).
type metric struct {
	scenario, name string
	get            func(*Result) float64
	higherBetter   bool
	format         func(float64) string
}

func perObj(f func(*Result) float64) func(*Result) float64 {
	return func(r *Result) float64 { return r.PerObject(f(r)) }
}

func perReconcile(f func(*Result) float64) func(*Result) float64 {
	return func(r *Result) float64 {
		if math.IsNaN(r.Reconciles) || r.Reconciles == 0 {
			return math.NaN()
		}
		return f(r) / r.Reconciles
	}
}

func durMetric(f func(*Result) time.Duration) func(*Result) float64 {
	return func(r *Result) float64 {
		d := f(r)
		if d == 0 {
			return math.NaN()
		}
		return float64(d) / float64(time.Millisecond)
	}
}

func mib(r *Result) float64 {
	if r.HeapBytes == 0 || r.N == 0 {
		return math.NaN()
	}
	return r.HeapBytes / float64(r.N) * 1000 / (1 << 20)
}

func kib(r *Result) float64 {
	if r.StoredBytes == 0 || r.N == 0 {
		return math.NaN()
	}
	return r.StoredBytes / float64(r.N) / 1024
}

func liveGets(r *Result) float64 { return float64(r.LiveGets) }

func writes(r *Result) float64 { return float64(r.Writes) }

func dryRuns(r *Result) float64 { return float64(r.DryRuns) }

func reconciles(r *Result) float64 { return r.Reconciles }

func throughput(r *Result) float64 { return r.Throughput }

// runExtreme is pick of a result's run throughputs; NaN for a result
// measured once.
func runExtreme(pick func([]float64) float64) func(*Result) float64 {
	return func(r *Result) float64 {
		if len(r.RunThroughputs) == 0 {
			return math.NaN()
		}
		return pick(r.RunThroughputs)
	}
}

func failedReqs(r *Result) float64 { return float64(r.FailedTotal) }

// cpuMs is the contender's CPU in milliseconds.
func cpuMs(r *Result) float64 { return 1000 * r.CPU() }

// controlPlaneMs is the control plane's CPU in milliseconds.
func controlPlaneMs(r *Result) float64 { return 1000 * r.ControlPlaneCPU() }

func headline() []metric {
	return []metric{
		{ScenarioConverge, "CR/s (create → Ready)", throughput, true, num},
		{ScenarioConverge, "CR/s, slowest round", runExtreme(slices.Min[[]float64]), true, num},
		{ScenarioConverge, "CR/s, fastest round", runExtreme(slices.Max[[]float64]), true, num},
		{ScenarioConverge, "writes per CR", perObj(writes), false, num},
		{ScenarioConverge, "dry-run requests per CR", perObj(dryRuns), false, num},
		{ScenarioConverge, "reconciles per CR (goal ≤ 2)", perObj(reconciles), false, num},
		{ScenarioConverge, "failed requests", failedReqs, false, num},
		{ScenarioConverge, "p50 create → Ready (ms)", durMetric(func(r *Result) time.Duration { return r.P50 }), false, num},
		{ScenarioConverge, "p99 create → Ready (ms)", durMetric(func(r *Result) time.Duration { return r.P99 }), false, num},
		{ScenarioConverge, "operator CPU ms per converged CR", perObj(cpuMs), false, num},
		{ScenarioConverge, "control-plane CPU ms per converged CR (kube-apiserver + etcd)", perObj(controlPlaneMs), false, num},
		{ScenarioRestart, "reconciles/s (ceiling: objects/s of one LIST per kind)", throughput, true, num},
		{ScenarioRestart, "reconciles/s, slowest run", runExtreme(slices.Min[[]float64]), true, num},
		{ScenarioRestart, "reconciles/s, fastest run", runExtreme(slices.Max[[]float64]), true, num},
		{ScenarioRestart, "ms until the caches synced (ceiling: the LISTs)", func(r *Result) float64 { return 1000 * r.SyncSeconds }, false, num},
		{ScenarioRestart, "reconciles per CR", perObj(reconciles), false, num},
		{ScenarioRestart, "writes per reconcile (goal 0)", perReconcile(writes), false, num},
		{ScenarioRestart, "live GETs per reconcile (goal 0)", perReconcile(liveGets), false, num},
		{ScenarioRestart, "dry-run requests per reconcile", perReconcile(dryRuns), false, num},
		{ScenarioRestart, "heap MiB per 1,000 CR bundles (after GC)", mib, false, num},
		{ScenarioRestart, "stored KiB per CR bundle (JSON, managedFields included)", kib, false, num},
		{ScenarioRestart, "operator CPU ms per CR", perObj(cpuMs), false, num},
		{ScenarioChurn, "p50 spec change → Ready (ms)", durMetric(func(r *Result) time.Duration { return r.P50 }), false, num},
		{ScenarioChurn, "p99 spec change → Ready (ms)", durMetric(func(r *Result) time.Duration { return r.P99 }), false, num},
		{ScenarioChurn, "writes per change", perObj(writes), false, num},
		{ScenarioChurn, "reconciles per change", perObj(reconciles), false, num},
		{ScenarioChurn, "operator CPU ms per change", perObj(cpuMs), false, num},
		{ScenarioChurn, "control-plane CPU ms per change", perObj(controlPlaneMs), false, num},
		{ScenarioDelete, "CR/s (delete → gone)", throughput, true, num},
		{ScenarioDelete, "CR/s, slowest round", runExtreme(slices.Min[[]float64]), true, num},
		{ScenarioDelete, "CR/s, fastest round", runExtreme(slices.Max[[]float64]), true, num},
		{ScenarioDelete, "writes per CR (goal 1)", perObj(writes), false, num},
		{ScenarioDelete, "reconciles per CR", perObj(reconciles), false, num},
		{ScenarioDelete, "failed requests", failedReqs, false, num},
		{ScenarioDelete, "operator CPU ms per CR", perObj(cpuMs), false, num},
		{ScenarioDelete, "control-plane CPU ms per CR", perObj(controlPlaneMs), false, num},
	}
}

// valueAt is get of contender's result in scenario at size, or NaN.
func valueAt(rep *Report, size int, scenario, contender string, get func(*Result) float64) float64 {
	r := rep.FindAt(scenario, contender, size)
	if r == nil {
		return math.NaN()
	}
	return get(r)
}

// sizes are the report's pass sizes (a report written before passes existed
// has only its N).
func sizes(rep *Report) []int {
	if len(rep.Sizes) == 0 {
		return []int{rep.Settings.N}
	}
	return rep.Sizes
}

// count formats n with thousands separators (20,000).
func count(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// headlineTable writes the headline table of the pass of size WebApps.
func headlineTable(b *strings.Builder, rep *Report, size int) {
	b.WriteString("| scenario | figure | ceiling | baseline | flux | opkit | opkit / ceiling | opkit / baseline | opkit / flux |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, m := range headline() {
		at := func(c string) float64 { return valueAt(rep, size, m.scenario, c, m.get) }
		c, bl, fl, o := at(Ceiling), at(Baseline), at(Flux), at(Opkit)
		if math.IsNaN(c) && math.IsNaN(bl) && math.IsNaN(fl) && math.IsNaN(o) {
			continue
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", m.scenario, m.name, m.format(c), m.format(bl), m.format(fl), m.format(o), ratio(o, c), ratio(o, bl), ratio(o, fl))
	}
	b.WriteString("\n")
}

// pairedRounds returns opkit's throughput over other's in each round both
// were measured in, in round order, and their median; nil and NaN unless
// both ran the same number (> 1) of rounds.
func pairedRounds(opkit, other *Result) ([]float64, float64) {
	if opkit == nil || other == nil || len(opkit.RunThroughputs) < 2 || len(opkit.RunThroughputs) != len(other.RunThroughputs) {
		return nil, math.NaN()
	}
	ratios := make([]float64, len(opkit.RunThroughputs))
	for i, v := range opkit.RunThroughputs {
		ratios[i] = v / other.RunThroughputs[i]
	}
	sorted := slices.Sorted(slices.Values(ratios))
	med := sorted[len(sorted)/2]
	if len(sorted)%2 == 0 {
		med = (sorted[len(sorted)/2-1] + sorted[len(sorted)/2]) / 2
	}
	return ratios, med
}

// pairedRoundsMarkdown writes, for converge and delete at every size
// measured in rounds, opkit's throughput over each other contender's round
// by round and the median of those ratios; nothing when no size has rounds.
func pairedRoundsMarkdown(b *strings.Builder, rep *Report) {
	var rows []string
	for _, size := range sizes(rep) {
		for _, sc := range []string{ScenarioConverge, ScenarioDelete} {
			o := rep.FindAt(sc, Opkit, size)
			row := fmt.Sprintf("| %s | %s |", count(size), sc)
			paired := false
			for _, other := range []string{Ceiling, Baseline, Flux} {
				ratios, med := pairedRounds(o, rep.FindAt(sc, other, size))
				if ratios == nil {
					row += " n/a | n/a |"
					continue
				}
				paired = true
				parts := make([]string, len(ratios))
				for i, r := range ratios {
					parts[i] = fmt.Sprintf("%.2f", r)
				}
				row += fmt.Sprintf(" %s | %.2f× |", strings.Join(parts, ", "), med)
			}
			if paired {
				rows = append(rows, row)
			}
		}
	}
	if len(rows) == 0 {
		return
	}
	b.WriteString("## Rounds paired\n\n")
	b.WriteString("Each round runs every contender back to back, so opkit's throughput over another's within one round is less exposed to the machine's drift over the run than the ratio of the two median rounds in the headline. Per round (round 1 first) and the median of those ratios; the goals above use the headline's ratio.\n\n")
	b.WriteString("| N | scenario | opkit / ceiling by round | median | opkit / baseline by round | median | opkit / flux by round | median |\n|---:|---|---|---:|---|---:|---|---:|\n")
	for _, row := range rows {
		b.WriteString(row + "\n")
	}
	b.WriteString("\n")
}

// goalRows writes the rows of opkit's goals at size: the steady-state and
// write-count goals as absolute figures, the others as ratios of opkit's
// figure to the ceiling's or the baseline's in the same run (issue 24's
// targets).
func goalRows(b *strings.Builder, rep *Report, size int) {
	goal := func(name string, v float64, ok bool) {
		mark, text := "no", num(v)
		if ok {
			mark = "yes"
		}
		if math.IsNaN(v) {
			mark = "not measured"
		} else if !ok {
			// A miss by less than the rounding of num (2.002 reconciles
			// per CR against ≤ 2) shows the digits that miss.
			text = strconv.FormatFloat(v, 'f', -1, 64)
			if len(text) > 6 {
				text = fmt.Sprintf("%.4f", v)
			}
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", name, count(size), text, mark)
	}
	at := func(sc, c string, get func(*Result) float64) float64 { return valueAt(rep, size, sc, c, get) }
	rel := func(sc, other string, get func(*Result) float64) float64 {
		return at(sc, Opkit, get) / at(sc, other, get)
	}
	restartW := at(ScenarioRestart, Opkit, perReconcile(writes))
	goal("no-op resync: 0 writes per reconcile", restartW, restartW == 0)
	restartG := at(ScenarioRestart, Opkit, perReconcile(liveGets))
	goal("no-op resync: 0 live GETs per reconcile", restartG, restartG == 0)
	rec := at(ScenarioConverge, Opkit, perObj(reconciles))
	goal("converge: ≤ 2 reconciles per CR", rec, rec <= 2)
	del := at(ScenarioDelete, Opkit, perObj(writes))
	goal("delete: 1 write per CR", del, del <= 1.0001)
	fails := at(ScenarioConverge, Opkit, failedReqs) + at(ScenarioDelete, Opkit, failedReqs)
	goal("converge and delete: 0 failed requests", fails, fails == 0)
	v := rel(ScenarioConverge, Ceiling, throughput)
	goal("converge: ≥ 0.95× the ceiling's CR/s", v, v >= 0.95)
	v = rel(ScenarioConverge, Ceiling, durMetric(func(r *Result) time.Duration { return r.P50 }))
	goal("converge: p50 create → Ready ≤ 1.2× the ceiling's", v, v <= 1.2)
	v = rel(ScenarioConverge, Ceiling, durMetric(func(r *Result) time.Duration { return r.P99 }))
	goal("converge: p99 create → Ready ≤ 1.2× the ceiling's", v, v <= 1.2)
	v = rel(ScenarioRestart, Baseline, mib)
	goal("restart: heap ≤ 0.6× the baseline's per 1,000 bundles", v, v <= 0.6)
	v = rel(ScenarioRestart, Ceiling, throughput)
	goal("restart: ≥ 0.5× the LIST ceiling", v, v >= 0.5)
	v = rel(ScenarioDelete, Baseline, throughput)
	goal("delete: ≥ 1.0× the baseline's CR/s", v, v >= 1)
}

func markdown(rep *Report, charts []string) string {
	var b strings.Builder
	s := rep.Settings
	fmt.Fprintf(&b, "# opkit operator benchmark — %s\n\n", rep.Date.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "Mode **%s**, %d results in %s. Generated by `make bench` (`cd bench && go run ./cmd/opkit-bench`).\n\n", rep.Mode, len(rep.Results), rep.Took.Round(time.Second))
	if rep.Isolated {
		b.WriteString("The contenders are measured one after another, every scenario of every contender on a fresh control plane (etcd + kube-apiserver from `testenv`); restart, churn and delete first converge their WebApps with that contender (unmeasured setup):\n\n")
	} else {
		b.WriteString("The contenders are measured one after another, each on a fresh control plane (etcd + kube-apiserver from `testenv`) on which the scenarios run as one lifecycle — converge, restart, churn, delete — each starting from the state the previous one left:\n\n")
	}
	b.WriteString("- **ceiling** — the API server's own throughput for the writes an ideal webapp operator makes, sent by a raw client loop (no cache, no watch, no reads) that the load generator tells what to do;\n")
	b.WriteString("- **baseline** — the same operator written the way the kubebuilder book teaches (`bench/baseline`: plain controller-runtime, `controllerutil.CreateOrUpdate`, `Status().Update`);\n")
	b.WriteString("- **flux** — the same operator written on the peer library `github.com/fluxcd/pkg/ssa` (`bench/flux`: `ResourceManager.ApplyAll` — a live GET and a server-side dry-run apply per child, a real apply only on drift — ssa ownership labels, prune by ownership with `DeleteAll`, readiness by kstatus);\n")
	b.WriteString("- **opkit** — `examples/webapp` (`controller.Setup`), without observability (the baseline emits no events either).\n\n")
	b.WriteString("> The machine has few cores, shared with other engineers' builds and tests while this ran: absolute numbers are noisy, ratios within one run are more telling than numbers across runs.\n\n")

	for i, size := range sizes(rep) {
		if i == 0 {
			fmt.Fprintf(&b, "## Headline (N = %s)\n\n", count(size))
		} else {
			fmt.Fprintf(&b, "## Headline at N = %s\n\n", count(size))
		}
		headlineTable(&b, rep, size)
	}
	b.WriteString("Ratios are opkit's figure divided by the other's: above 1× is better for throughput, worse for counts, latencies and CPU.\n\n")

	b.WriteString("## opkit's goals\n\n")
	b.WriteString("| goal | N | measured | met |\n|---|---:|---:|:---:|\n")
	for _, size := range sizes(rep) {
		goalRows(&b, rep, size)
	}
	b.WriteString("\n")

	pairedRoundsMarkdown(&b, rep)

	if len(sizes(rep)) > 1 {
		scalingMarkdown(&b, rep)
	}

	if sh := rep.Sharding; sh != nil {
		shardingMarkdown(&b, sh)
	}

	if len(charts) > 0 {
		b.WriteString("## Charts\n\n")
		for _, c := range charts {
			fmt.Fprintf(&b, "![%s](%s)\n\n", strings.TrimSuffix(c, ".svg"), c)
		}
	}

	b.WriteString("## Details\n\n")
	for _, sc := range []string{ScenarioConverge, ScenarioRestart, ScenarioChurn, ScenarioDelete} {
		var rs []*Result
		for _, r := range rep.Results {
			if r.Scenario == sc {
				rs = append(rs, r)
			}
		}
		if len(rs) == 0 {
			continue
		}
		fmt.Fprintf(&b, "### %s\n\n%s\n\n", sc, scenarioText(sc, s))
		b.WriteString("| contender | converged | n | window | throughput | p50 | p99 | max | reconciles | writes | failed (by code) | CPU s: contender / process / control plane | setup |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|\n")
		for _, r := range rs {
			conv := "yes"
			if !r.Converged {
				conv = fmt.Sprintf("**no** (%d outstanding)", r.Outstanding)
				if r.Error != "" {
					conv += ": " + r.Error
				}
			}
			fmt.Fprintf(&b, "| %s | %s | %d | %.2f s | %s %s | %s | %s | %s | %s | %d | %s | %s / %s / %s | %s |\n", label(rep, r), conv, r.N, r.Seconds,
				num(r.Throughput), r.Unit, ms(r.P50), ms(r.P99), ms(r.Max), num(r.Reconciles), r.Writes, failures(r), num(r.CPU()), num(r.ProcessCPUSeconds), num(r.ControlPlaneCPU()), setupText(r))
		}
		b.WriteString("\nRequests by verb and resource (the contender's own client, `testenv.CountRequests`):\n\n")
		keys := map[string]bool{}
		for _, r := range rs {
			for k := range r.Requests {
				keys[k] = true
			}
		}
		b.WriteString("| request |")
		for _, r := range rs {
			fmt.Fprintf(&b, " %s |", label(rep, r))
		}
		b.WriteString("\n|---|")
		for range rs {
			b.WriteString("---:|")
		}
		b.WriteString("\n")
		for _, k := range sortedKeys(keys) {
			fmt.Fprintf(&b, "| %s |", k)
			for _, r := range rs {
				fmt.Fprintf(&b, " %d |", r.Requests[k])
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}

	b.WriteString("## Machine and settings\n\n")
	m := rep.Machine
	fmt.Fprintf(&b, "- date: %s\n- CPUs (nproc): %d (%s)\n- memory: %d MiB\n- load average at start: %s\n- Go: %s (%s)\n- Kubernetes (kube-apiserver, etcd via testenv): %s\n",
		rep.Date.Format(time.RFC3339), m.CPUs, m.CPUModel, m.MemoryMiB, m.LoadAvg, m.Go, m.OS, m.Kubernetes)
	fmt.Fprintf(&b, "- reconcile workers (MaxConcurrentReconciles; ceiling loop workers; flux: ApplyAll concurrency 4 within each reconcile): %d\n", s.Workers)
	fmt.Fprintf(&b, "- client QPS / Burst of every contender: %.0f / %d (high on purpose: the API server, not the client limiter, should bind)\n", s.QPS, s.Burst)
	fmt.Fprintf(&b, "- load generator: %d concurrent requests, its own unthrottled client (not counted)\n", s.LoadWorkers)
	fmt.Fprintf(&b, "- N (converge, restart, delete): %d; churn: %d WebApps, %.0f changes/s for %s\n", s.N, s.ChurnObjects, s.ChurnRate, s.ChurnDuration)
	if len(sizes(rep)) > 1 {
		fmt.Fprintf(&b, "- further passes (chained, same settings otherwise), N: %v%s\n", sizes(rep)[1:], passRoundsText(rep.Passes))
	}
	fmt.Fprintf(&b, "- counts are read after %s without requests or reconciles\n", s.Quiet)
	if rep.Sharding != nil {
		fmt.Fprintf(&b, "- sharding: %d WebApps, 3 replicas, member Lease duration %s, each replica with the same workers and QPS/Burst\n", s.ShardObjects, s.ShardLeaseDuration)
	}
	b.WriteString("\n")

	b.WriteString("## Method\n\n")
	b.WriteString(method)
	return b.String()
}

// label names r's contender, with its pass's size when that is not the
// main pass's.
func label(rep *Report, r *Result) string {
	if r.Size == 0 || r.Size == rep.Settings.N {
		return r.Contender
	}
	return fmt.Sprintf("%s (N = %s)", r.Contender, count(r.Size))
}

func failures(r *Result) string {
	if r.FailedTotal == 0 {
		return "0"
	}
	var parts []string
	codes := make([]int, 0, len(r.Failed))
	for c := range r.Failed {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	for _, c := range codes {
		parts = append(parts, fmt.Sprintf("%d×%d", r.Failed[c], c))
	}
	return fmt.Sprintf("%d (%s)", r.FailedTotal, strings.Join(parts, ", "))
}

func setupText(r *Result) string {
	if r.SetupSeconds == 0 {
		return ""
	}
	return fmt.Sprintf("%.1f s", r.SetupSeconds)
}

func restartRunsText(runs int) string {
	if runs <= 1 {
		return ""
	}
	return fmt.Sprintf(" Each contender (the ceiling too) is measured %d times, a stop and a fresh start each: every figure is the run with the median throughput's, the slowest and fastest runs' throughput beside it.", runs)
}

func roundsText(rounds, n int) string {
	if rounds <= 1 {
		return ""
	}
	return fmt.Sprintf(" At N = %d each contender (the ceiling too) is measured in %d rounds: round 1 as every scenario runs, then each round gives every contender in turn (round r from the r-th contender on) a fresh control plane on which converge and then delete are measured; every figure is the round with the median throughput's, the slowest and fastest rounds' throughput beside it.", n, rounds)
}

// passRoundsText names the further passes that measured converge and
// delete in rounds.
func passRoundsText(passes []Pass) string {
	var parts []string
	for _, p := range passes {
		if p.Rounds > 1 {
			parts = append(parts, fmt.Sprintf("at N = %d converge and delete in %d rounds, as at the main N", p.N, p.Rounds))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "; " + strings.Join(parts, "; ")
}

func scenarioText(sc string, s Settings) string {
	switch sc {
	case ScenarioConverge:
		return fmt.Sprintf("The load generator creates %d WebApps; the window runs from the first create to the last WebApp Ready for generation 1. Writes, reconciles and failures are counted until the contender is quiet.%s", s.N, roundsText(s.Rounds, s.N))
	case ScenarioRestart:
		return fmt.Sprintf("%d WebApps are converged by the contender itself (setup), the contender is stopped and a new manager started: its requests are counted from its start (the informers' initial LIST and WATCH included) until its reconciles stop. The window ends at its last reconcile. The heap figure is the live heap (after runtime.GC) the new manager added, scaled to 1,000 WebApps with their ConfigMap, Deployment and Service; harness informers are stopped during it. The ceiling is one LIST per kind from the watch cache — what any restart costs.%s", s.N, restartRunsText(s.RestartRuns))
	case ScenarioChurn:
		return fmt.Sprintf("%d WebApps are converged (setup); then one WebApp's spec.config changes every %s, round robin, for %s. Latency is from sending the change to the WebApp showing Ready for the new generation.", s.ChurnObjects, time.Duration(float64(time.Second)/s.ChurnRate), s.ChurnDuration)
	case ScenarioDelete:
		return fmt.Sprintf("%d WebApps, each with the finalizer, are converged (setup) and then deleted by the load generator; the window runs from the first delete to the last WebApp gone. No garbage collector runs, so children stay: only the contenders' own work is timed.%s", s.N, roundsText(s.Rounds, s.N))
	}
	return ""
}

const method = `- **Ready** means: the WebApp's Ready condition is True, its observedGeneration and status.observedGeneration equal metadata.generation, and Reconciling is not True. A separate informer in the harness (not counted) records the first event that shows it.
- **Deployments**: the control plane runs no kube-controller-manager, so nothing would ever make a Deployment Available and no contender could report Ready. A small stub in the harness plays the Deployment controller: whenever a Deployment's status.observedGeneration is behind its generation it patches a status with every replica updated, ready and available (no ReplicaSets, no pods). It runs for every contender, the ceiling included; its requests are not counted. This keeps the real dependency path (child status change → owner reconcile → Ready) while workloads mode (scheduler, kwok, real ReplicaSets) would make the Deployment controller, not the operators, the bottleneck at N = 1,000 on this machine.
- **Ceiling** writes per created WebApp: finalizer patch, three creates, a Progressing and a Ready status patch; per spec change: ConfigMap and Deployment patches and the two status patches; per delete: the finalizer removal. It never reads, so it is an upper bound no watch-driven operator reaches.
- **Requests** are counted on each contender's own rest.Config with ` + "`testenv.CountRequests`" + ` (verb and resource as the API server classifies them); failures are responses ≥ 400 on the same transport. Reconciles come from controller-runtime's ` + "`controller_runtime_reconcile_total`" + `.
- **Workers and QPS/Burst** are identical for all contenders (see settings). Headless Services everywhere (spec.headless=true), so ClusterIP allocation is not the bottleneck.
- **CPU** is the CPU the contender's own goroutines used during the measured phase (until quiet): everything a contender starts runs under a pprof label and on an HTTP transport of its own, goroutines inherit the label, and the Go CPU profiler (100 samples/s per running thread) tags each sample with it; the harness (load generator, readiness tracker, Deployment stub) is unlabelled. The process figure (getrusage, same window) adds the harness and the garbage collector's background workers. The API server's and etcd's CPU is in neither: the **control-plane** figure is theirs (user + system time of the kube-apiserver and etcd processes from /proc, 10 ms resolution, same window). It includes what the phase's load costs the server whoever answers it (the load generator's requests, the harness's watches and Deployment stub), the same for every contender; the differences between contenders are what their requests and watches cost. On this 2-core machine the operator and the control plane share the cores, so both figures bound throughput.
- **flux** reads each child live (ApplyAll's GET of an unstructured object, which controller-runtime does not cache by default, as in Flux's own controllers) and sends a server-side dry-run apply per child on every reconcile. Dry-runs persist nothing: they are not counted as writes but as dry-runs (a figure of their own; the per-request table lists them under patch). Its failed requests in converge are 404s: ApplyAll's GET of a child that does not exist yet.
- **Not covered**: webhooks, observability overhead (events, metrics, traces are off in both operators).
`

// writeCharts writes the SVG charts and returns their file names.
func writeCharts(rep *Report, dir string) ([]string, error) {
	var names []string
	add := func(name, svg string) error {
		if svg == "" {
			return nil
		}
		names = append(names, name)
		return os.WriteFile(filepath.Join(dir, name), []byte(svg), 0o644)
	}
	for _, sc := range []struct{ scenario, title string }{
		{ScenarioConverge, "converge: CR/s from create to Ready"},
		{ScenarioDelete, "delete: CR/s from delete to gone"},
		{ScenarioRestart, "restart: no-op reconciles/s (ceiling: one LIST per kind)"},
	} {
		var labels []string
		var vals []float64
		for _, c := range []string{Baseline, Flux, Opkit} {
			if r := rep.Find(sc.scenario, c); r != nil {
				labels, vals = append(labels, c), append(vals, r.Throughput)
			}
		}
		ceil := math.NaN()
		if r := rep.Find(sc.scenario, Ceiling); r != nil {
			ceil = r.Throughput
		}
		if err := add("throughput-"+sc.scenario+".svg", barChart(sc.title, labels, vals, ceil)); err != nil {
			return nil, err
		}
	}
	for _, sc := range []struct{ scenario, title string }{
		{ScenarioConverge, "converge: create → Ready latency (CDF)"},
		{ScenarioChurn, "churn: spec change → Ready latency (CDF)"},
		{ScenarioDelete, "delete: delete → gone latency (CDF)"},
	} {
		var series []cdfSeries
		for _, c := range contenders {
			if r := rep.Find(sc.scenario, c); r != nil && len(r.Latencies) > 0 {
				series = append(series, cdfSeries{name: c, lat: r.Latencies})
			}
		}
		if err := add("latency-"+sc.scenario+".svg", cdfChart(sc.title, series)); err != nil {
			return nil, err
		}
	}
	if err := add("writes-per-object.svg", writesChart(rep)); err != nil {
		return nil, err
	}
	scaling := scalingCharts(rep)
	for _, f := range scaleFigures() {
		if err := add(f.file, scaling[f.file]); err != nil {
			return nil, err
		}
	}
	if sh := rep.Sharding; sh != nil {
		if err := add("sharding-memory.svg", shardMemoryChart(sh)); err != nil {
			return nil, err
		}
		if err := add("sharding-handover.svg", handOverChart(sh)); err != nil {
			return nil, err
		}
	}
	return names, nil
}

const (
	chartW, chartH               = 700, 320
	padL, padR, padT, padB       = 70, 210, 40, 50
	plotW, plotH                 = chartW - padL - padR, chartH - padT - padB
	fontAttrs                    = `font-family="sans-serif" font-size="12"`
	gridColor, axisColor, txtCol = "#e0e0e0", "#333", "#222"
)

func svgOpen(b *strings.Builder, title string) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" %s>`+"\n", chartW, chartH, chartW, chartH, fontAttrs)
	fmt.Fprintf(b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(b, `<text x="%d" y="22" font-size="14" font-weight="bold" fill="%s">%s</text>`+"\n", padL, txtCol, html.EscapeString(title))
}

// niceMax rounds v up to 1, 2 or 5 times a power of ten.
func niceMax(v float64) float64 {
	if v <= 0 || math.IsNaN(v) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func yAxis(b *strings.Builder, top float64, unit string) {
	for i := 0; i <= 5; i++ {
		v := top * float64(i) / 5
		y := float64(padT+plotH) - float64(plotH)*float64(i)/5
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"/>`+"\n", padL, y, padL+plotW, y, gridColor)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end" fill="%s">%s</text>`+"\n", padL-6, y+4, txtCol, num(v))
	}
	fmt.Fprintf(b, `<text x="14" y="%d" transform="rotate(-90 14 %d)" text-anchor="middle" fill="%s">%s</text>`+"\n", padT+plotH/2, padT+plotH/2, txtCol, html.EscapeString(unit))
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s"/>`+"\n", padL, padT+plotH, padL+plotW, padT+plotH, axisColor)
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s"/>`+"\n", padL, padT, padL, padT+plotH, axisColor)
}

// barChart draws one bar per contender and the ceiling as a dashed line.
func barChart(title string, labels []string, vals []float64, ceil float64) string {
	return bars(title, "per second", labels, vals, ceil, "ceiling", "of ceiling")
}

// bars draws one bar per label and, unless ref is NaN, ref as a dashed line
// named refName; each bar is captioned with its share of ref ("… share").
func bars(title, unit string, labels []string, vals []float64, ceil float64, refName, share string) string {
	if len(vals) == 0 {
		return ""
	}
	top := ceil
	for _, v := range vals {
		if math.IsNaN(top) || v > top {
			top = v
		}
	}
	top = niceMax(top * 1.05)
	var b strings.Builder
	svgOpen(&b, title)
	yAxis(&b, top, unit)
	slot := float64(plotW) / float64(len(vals))
	for i, v := range vals {
		h := float64(plotH) * v / top
		x := float64(padL) + slot*float64(i) + slot*0.2
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n", x, float64(padT+plotH)-h, slot*0.6, h, color(labels[i]))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="%s">%s</text>`+"\n", x+slot*0.3, float64(padT+plotH)-h-5, txtCol, num(v))
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="%s">%s</text>`+"\n", x+slot*0.3, padT+plotH+18, txtCol, labels[i])
		if !math.IsNaN(ceil) && ceil > 0 {
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%.0f%% %s</text>`+"\n", x+slot*0.3, padT+plotH+34, 100*v/ceil, share)
		}
	}
	if !math.IsNaN(ceil) {
		y := float64(padT+plotH) - float64(plotH)*ceil/top
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s" stroke-width="2" stroke-dasharray="6 4"/>`+"\n", padL, y, padL+plotW, y, color(Ceiling))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" fill="%s">%s %s</text>`+"\n", padL+plotW+6, y+4, color(Ceiling), refName, num(ceil))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

type cdfSeries struct {
	name string
	lat  []time.Duration
}

// cdfChart draws each series' latency distribution as a cumulative curve.
// The x axis ends at 1.2 times the largest p99, so one outlier does not
// flatten every curve; the legend gives each maximum.
func cdfChart(title string, series []cdfSeries) string {
	if len(series) == 0 {
		return ""
	}
	var xmax float64
	for _, s := range series {
		xmax = math.Max(xmax, float64(percentile(s.lat, 0.99))/float64(time.Millisecond))
	}
	xmax = niceMax(xmax * 1.2)
	var b strings.Builder
	svgOpen(&b, title)
	for i := 0; i <= 4; i++ {
		y := float64(padT+plotH) - float64(plotH)*float64(i)/4
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"/>`+"\n", padL, y, padL+plotW, y, gridColor)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" fill="%s">p%d</text>`+"\n", padL-6, y+4, txtCol, i*25)
	}
	for i := 0; i <= 5; i++ {
		x := float64(padL) + float64(plotW)*float64(i)/5
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>`+"\n", x, padT, x, padT+plotH, gridColor)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="%s">%s</text>`+"\n", x, padT+plotH+16, txtCol, num(xmax*float64(i)/5))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" fill="%s">milliseconds</text>`+"\n", padL+plotW/2, padT+plotH+36, txtCol)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s"/>`+"\n", padL, padT+plotH, padL+plotW, padT+plotH, axisColor)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s"/>`+"\n", padL, padT, padL, padT+plotH, axisColor)
	// The p99 line.
	y99 := float64(padT+plotH) - float64(plotH)*0.99
	fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#bbb" stroke-dasharray="3 3"/>`+"\n", padL, y99, padL+plotW, y99)
	for i, s := range series {
		var pts []string
		n := len(s.lat)
		step := max(1, n/400)
		for j := 0; j < n; j += step {
			pts = append(pts, cdfPoint(s.lat[j], j+1, n, xmax))
		}
		pts = append(pts, cdfPoint(s.lat[n-1], n, n, xmax))
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", color(s.name), strings.Join(pts, " "))
		ly := padT + 10 + i*36
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>`+"\n", padL+plotW+8, ly, padL+plotW+24, ly, color(s.name))
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="%s">%s</text>`+"\n", padL+plotW+28, ly+4, txtCol, s.name)
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#555" font-size="10">p99 %s, max %s</text>`+"\n", padL+plotW+28, ly+18,
			ms(percentile(s.lat, 0.99)), ms(s.lat[n-1]))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func cdfPoint(d time.Duration, rank, n int, xmax float64) string {
	x := math.Min(float64(d)/float64(time.Millisecond), xmax)
	px := float64(padL) + float64(plotW)*x/xmax
	py := float64(padT+plotH) - float64(plotH)*float64(rank)/float64(n)
	return fmt.Sprintf("%.1f,%.1f", px, py)
}

// writesChart compares writes per object across scenarios, grouped by scenario.
func writesChart(rep *Report) string {
	type group struct {
		label string
		vals  map[string]float64
	}
	var groups []group
	for _, g := range []struct {
		scenario, label string
		get             func(*Result) float64
	}{
		{ScenarioConverge, "converge/CR", perObj(writes)},
		{ScenarioRestart, "restart/reconcile", perReconcile(writes)},
		{ScenarioChurn, "churn/change", perObj(writes)},
		{ScenarioDelete, "delete/CR", perObj(writes)},
	} {
		vals := map[string]float64{}
		for _, c := range contenders {
			if r := rep.Find(g.scenario, c); r != nil {
				if v := g.get(r); !math.IsNaN(v) {
					vals[c] = v
				}
			}
		}
		if len(vals) > 0 {
			groups = append(groups, group{g.label, vals})
		}
	}
	if len(groups) == 0 {
		return ""
	}
	top := 0.0
	for _, g := range groups {
		for _, v := range g.vals {
			top = math.Max(top, v)
		}
	}
	top = niceMax(top * 1.1)
	var b strings.Builder
	svgOpen(&b, "API writes per object (lower is better)")
	yAxis(&b, top, "writes")
	slot := float64(plotW) / float64(len(groups))
	bw := slot * 0.8 / float64(len(contenders))
	for gi, g := range groups {
		x0 := float64(padL) + slot*float64(gi) + slot*0.1
		for ci, c := range contenders {
			v, ok := g.vals[c]
			if !ok {
				continue
			}
			h := float64(plotH) * v / top
			x := x0 + bw*float64(ci)
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n", x, float64(padT+plotH)-h, bw*0.9, h, color(c))
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="10" fill="%s">%s</text>`+"\n", x+bw*0.45, float64(padT+plotH)-h-4, txtCol, num(v))
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="%s">%s</text>`+"\n", x0+slot*0.4, padT+plotH+18, txtCol, g.label)
	}
	for i, c := range contenders {
		ly := padT + 10 + i*20
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/>`+"\n", padL+plotW+8, ly-8, color(c))
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="%s">%s</text>`+"\n", padL+plotW+26, ly+2, txtCol, c)
	}
	b.WriteString("</svg>\n")
	return b.String()
}
