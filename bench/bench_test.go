package bench_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/pprof/profile"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/opkit/opkit/bench"
)

// TestQuickBenchmarkSmoke runs the benchmark end to end with tiny numbers so
// it cannot rot: the report and charts are produced and every contender
// converged in every scenario, and the sharding scenario's fleet took over,
// handed over twice and never reconciled one WebApp on two replicas at once.
// It asserts nothing about speed.
func TestQuickBenchmarkSmoke(t *testing.T) {
	ctrl.SetLogger(logr.Discard())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s := bench.Quick()
	s.N, s.ChurnObjects, s.ChurnRate, s.ChurnDuration = 10, 5, 10, time.Second
	s.Quiet = 500 * time.Millisecond
	s.ShardObjects, s.ShardLeaseDuration = 12, 2*time.Second
	s.RestartRuns, s.Rounds = 2, 2
	out := t.TempDir()
	var log strings.Builder
	profiles := filepath.Join(out, "profiles")
	rep, err := bench.Run(ctx, bench.Options{Out: out, Mode: "smoke", Settings: s, Log: &log, PhaseProfiles: profiles,
		Passes: []bench.Pass{{N: 15, Contenders: []string{bench.Opkit}, Rounds: 2}}})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if want := 4*4 + 4; len(rep.Results) != want {
		t.Fatalf("%d results, want %d\n%s", len(rep.Results), want, log.String())
	}
	for _, r := range rep.Results {
		if !r.Converged {
			t.Errorf("%s/%s did not converge: %d outstanding, %s\n", r.Scenario, r.Contender, r.Outstanding, r.Error)
		}
		// The contender's CPU is measured, within the process's; converging
		// takes every contender enough CPU for the profiler to see it (a
		// short phase, like the ceiling's four LISTs, may fall between two
		// of its samples). The profiler samples each thread every 10ms of
		// its CPU, counting from before the phase began, so its figure may
		// exceed getrusage's by up to a sample per thread that ran: a phase
		// of 38ms of process CPU was once given 4 samples (40ms).
		cpu := r.CPU()
		if math.IsNaN(cpu) || cpu > r.ProcessCPUSeconds+0.03 || r.Scenario == bench.ScenarioConverge && cpu == 0 {
			t.Errorf("%s/%s: contender CPU %.3fs, process CPU %.3fs", r.Scenario, r.Contender, cpu, r.ProcessCPUSeconds)
		}
		// The control plane's CPU is measured for every phase; creating
		// WebApps and their children always costs the API server some.
		if cp := r.ControlPlaneCPU(); math.IsNaN(cp) || cp < 0 || r.Scenario == bench.ScenarioConverge && cp == 0 {
			t.Errorf("%s/%s: control-plane CPU %.3fs", r.Scenario, r.Contender, cp)
		}
		if r.Scenario == bench.ScenarioRestart && (len(r.RunThroughputs) != 2 || r.Throughput != min(r.RunThroughputs[0], r.RunThroughputs[1])) {
			t.Errorf("restart/%s: throughput %v, runs %v: want the slower of 2 runs", r.Contender, r.Throughput, r.RunThroughputs)
		}
		// Converge and delete, at the main N (Settings.Rounds) and in the
		// pass at 15 (its Rounds): two rounds, the slower reported.
		if rounds := r.Scenario == bench.ScenarioConverge || r.Scenario == bench.ScenarioDelete; rounds &&
			(len(r.RunThroughputs) != 2 || r.Throughput != min(r.RunThroughputs[0], r.RunThroughputs[1])) {
			t.Errorf("%s/%s at %d: throughput %v, rounds %v: want the slower of 2 rounds", r.Scenario, r.Contender, r.Size, r.Throughput, r.RunThroughputs)
		}
		if r.DryRuns > 0 && r.Contender != bench.Flux {
			t.Errorf("%s/%s: %d dry-run requests", r.Scenario, r.Contender, r.DryRuns)
		}
	}
	switch sh := rep.Sharding; {
	case sh == nil:
		t.Error("the sharding scenario did not run")
	case sh.Error != "" || sh.Graceful.Error != "" || sh.Ungraceful.Error != "":
		t.Errorf("sharding: %q; graceful: %q; ungraceful: %q", sh.Error, sh.Graceful.Error, sh.Ungraceful.Error)
	case sh.MaxConcurrent > 1:
		t.Errorf("sharding: %d replicas inside one reconcile at once", sh.MaxConcurrent)
	case sh.Spread[sh.Leader] == sh.N || sh.Graceful.NotReady+sh.Ungraceful.NotReady > 0:
		t.Errorf("sharding: spread %v (leader %s), not Ready after the hand-overs %d + %d", sh.Spread, sh.Leader, sh.Graceful.NotReady, sh.Ungraceful.NotReady)
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.FindAt(bench.ScenarioRestart, bench.Opkit, 15); r == nil || r.Size != 15 || r.HeapBytes == 0 || rep.FindAt(bench.ScenarioRestart, bench.Baseline, 15) != nil {
		t.Errorf("the pass of 15 WebApps (opkit only): restart result %+v", r)
	}
	if f := rep.Find(bench.ScenarioConverge, bench.Flux); f == nil || f.DryRuns == 0 {
		t.Errorf("flux converge: no dry-run applies counted: %+v", f)
	}
	for _, want := range []string{"## Headline", "| converge | CR/s", "operator CPU ms per converged CR", "| flux |", "## Machine and settings", "throughput-converge.svg", "latency-churn.svg", "## Sharding (opkit only)", "sharding-handover.svg",
		"## Headline at N = 15", "## Scaling", "| opkit | 15 |", "scaling-heap.svg", "restart: heap ≤ 0.6× the baseline's", "reconciles/s, slowest run", "measured 2 times", "at N = 15 converge and delete in 2 rounds"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	for _, f := range []string{"report.json", "throughput-converge.svg", "latency-converge.svg", "writes-per-object.svg", "sharding-memory.svg", "sharding-handover.svg", "scaling-heap.svg", "scaling-writes.svg", "scaling-cpu.svg"} {
		data, err := os.ReadFile(filepath.Join(out, f))
		if err != nil || len(data) == 0 {
			t.Errorf("%s: %v (%d bytes)", f, err, len(data))
		}
	}
	// Each measured phase wrote the profile its CPU figure came from.
	for _, r := range rep.Results {
		f := filepath.Join(profiles, fmt.Sprintf("cpu-%s-%s-%d.pprof", r.Scenario, r.Contender, r.Size))
		if info, err := os.Stat(f); err != nil || info.Size() == 0 {
			t.Errorf("phase profile %s: %v", f, err)
		}
		// And the kube-apiserver's profile over the same phase: converging
		// always costs the server CPU its profiler samples.
		f = filepath.Join(profiles, fmt.Sprintf("cpu-apiserver-%s-%s-%d.pprof", r.Scenario, r.Contender, r.Size))
		if r.Scenario != bench.ScenarioConverge {
			if _, err := os.Stat(f); err != nil {
				t.Errorf("kube-apiserver profile: %v", err)
			}
			continue
		}
		if p, err := readProfile(f); err != nil {
			t.Errorf("kube-apiserver profile %s: %v", f, err)
		} else if len(p.Sample) == 0 || len(p.Mapping) == 0 || !strings.Contains(p.Mapping[0].File, "kube-apiserver") {
			t.Errorf("kube-apiserver profile %s: %d samples, mappings %v", f, len(p.Sample), p.Mapping)
		}
	}
	if t.Failed() {
		t.Log(log.String())
	}
}

func readProfile(path string) (*profile.Profile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	return profile.Parse(f)
}
