// Command opkit-bench runs the operator benchmark (package bench) and writes
// report.md, report.json and SVG charts to --out.
//
// It lives in the benchmark's own module (bench/go.mod); from the repository
// root, `make bench` runs it. Inside bench/:
//
//	go run ./cmd/opkit-bench --out ../out/bench           # default, 15-30 min on 2 cores
//	go run ./cmd/opkit-bench --out ../out/bench --quick   # CI smoke, < 3 min
//	go run ./cmd/opkit-bench --out ../out/bench --full    # 1,000, then 5,000, then 20,000 (opkit) WebApps
//	go run ./cmd/opkit-bench --passes 5000x3,20000=opkit+flux # further sizes after the main N (5,000 in 3 rounds)
//
// Every scenario of every contender runs on a fresh control plane; with
// --quick (or --chained) every contender gets one fresh control plane on
// which the scenarios run as a lifecycle (converge, restart, churn, delete).
// The sharding scenario (opkit only: three sharded replicas against one
// unsharded, graceful and ungraceful hand-over) always gets its own.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/opkit/opkit/bench"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "opkit-bench:", err)
		os.Exit(1)
	}
}

func run() error {
	out := flag.String("out", "out/bench", "output directory")
	quick := flag.Bool("quick", false, "small N, short churn: a smoke run (< 3 min)")
	full := flag.Bool("full", false, "N = 1,000, then passes at 5,000 (every contender) and 20,000 (opkit), with the scaling curve (1.5-2 h on 2 cores)")
	passes := flag.String("passes", "", "further sizes after the main N, comma-separated, each N, NxR (converge and delete in R rounds) and optionally =contender+contender (e.g. 5000x3,20000=opkit); each contender of a pass runs its scenarios chained on one fresh control plane; overrides --full's")
	isolated := flag.Bool("isolated", false, "a fresh control plane for every scenario, converging its WebApps first (the default, except with --quick)")
	chained := flag.Bool("chained", false, "one fresh control plane per contender, the scenarios run as a lifecycle on it (the default with --quick; about half the time)")
	n := flag.Int("n", 0, "override N (converge, restart, delete)")
	workers := flag.Int("workers", 0, "override reconcile workers")
	restarts := flag.Int("restarts", 0, "override how many times the restart scenario measures each contender (the median run is reported; default 3, 1 with --quick)")
	rounds := flag.Int("rounds", 0, "override how many rounds the main pass measures converge and delete in, every contender in turn each round (the median round is reported; default 3, 1 with --quick)")
	contenders := flag.String("contenders", "", "comma-separated subset of ceiling,baseline,flux,opkit")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of this process (the contenders and the harness; not the control plane) to this file; the report's per-contender CPU figures are then not measured (they use the same profiler)")
	heapProfiles := flag.String("heapprofiles", "", "write a heap profile of this process after each contender's restart heap measurement (heap-<contender>-<N>.pprof) into this directory (allocations are then sampled every 4 KiB, not 512 KiB)")
	phaseProfiles := flag.String("phaseprofiles", "", "write the CPU profile of each measured phase (cpu-<scenario>-<contender>-<N>.pprof, the one its CPU figures come from) and the kube-apiserver's over the same phase (cpu-apiserver-<scenario>-<contender>-<N>.pprof) into this directory; not with --cpuprofile")
	scenarios := flag.String("scenarios", "", "comma-separated subset of converge,restart,churn,delete,sharding (sharding runs for opkit only)")
	render := flag.String("render", "", "measure nothing: rewrite report.md and the charts of an earlier run's directory from its report.json, with this version's tables and figures")
	flag.Parse()
	if *render != "" {
		rep, err := bench.Render(*render)
		if err != nil {
			return err
		}
		fmt.Printf("rendered %s/report.md (%d results)\n", *render, len(rep.Results))
		return nil
	}

	mode, s := "default", bench.Default()
	switch {
	case *quick:
		mode, s = "quick", bench.Quick()
	case *full:
		mode, s = "full", bench.Full()
	}
	iso := mode != "quick"
	if *isolated {
		iso = true
	}
	if *chained {
		iso = false
	}
	if *n > 0 {
		s.N = *n
	}
	if *workers > 0 {
		s.Workers = *workers
	}
	if *rounds > 0 {
		s.Rounds = *rounds
	}
	if *restarts > 0 {
		s.RestartRuns = *restarts
	}
	var ps []bench.Pass
	if *full {
		ps = bench.FullPasses()
	}
	if *passes != "" {
		var err error
		if ps, err = parsePasses(*passes); err != nil {
			return err
		}
	}
	ctrl.SetLogger(logr.Discard())
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer func() {
			pprof.StopCPUProfile()
			_ = f.Close()
		}()
	}
	if *heapProfiles != "" {
		// Every 4 KiB allocated is sampled (the default is 512 KiB): the
		// profiles then attribute the heap of thousands of small objects.
		runtime.MemProfileRate = 4096
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	t0 := time.Now()
	rep, err := bench.Run(ctx, bench.Options{Out: *out, Mode: mode, Isolated: iso, Settings: s, Contenders: split(*contenders), Scenarios: split(*scenarios), Log: os.Stderr, HeapProfiles: *heapProfiles, Passes: ps, PhaseProfiles: *phaseProfiles})
	if err != nil {
		return err
	}
	fmt.Printf("wrote %s/report.md (%d results, %s)\n", *out, len(rep.Results), time.Since(t0).Round(time.Second))
	return nil
}

// parsePasses reads --passes: "5000x3,20000=opkit+flux" (N, then
// optionally xR for R rounds of converge and delete, then optionally
// =contender+contender).
func parsePasses(s string) ([]bench.Pass, error) {
	var ps []bench.Pass
	for _, item := range strings.Split(s, ",") {
		size, who, _ := strings.Cut(item, "=")
		n, rounds, hasRounds := strings.Cut(strings.TrimSpace(size), "x")
		v, err := strconv.Atoi(n)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("--passes: %q is not a positive number of WebApps", n)
		}
		p := bench.Pass{N: v}
		if hasRounds {
			if p.Rounds, err = strconv.Atoi(rounds); err != nil || p.Rounds <= 0 {
				return nil, fmt.Errorf("--passes: %q: the rounds after x must be a positive number", size)
			}
		}
		if who != "" {
			p.Contenders = strings.Split(who, "+")
		}
		ps = append(ps, p)
	}
	return ps, nil
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
