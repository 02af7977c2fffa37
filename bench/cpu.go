package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/pprof/profile"
	"k8s.io/client-go/rest"

	"github.com/opkit/opkit/testenv"
)

// The contenders run in the benchmark's process, beside the harness (load
// generator, readiness tracker, Deployment stub). A contender's CPU is the
// CPU of the goroutines carrying its pprof label: everything a contender
// starts runs inside pprof.Do(contenderLabel=name), and goroutines inherit
// the labels of the goroutine that starts them — its manager, informers,
// workers, the ceiling's loop, and the HTTP/2 connections of its own
// transport (withOwnTransport), which are dialled from its goroutines, so
// TLS and framing count too. The Go CPU profiler samples every running
// thread 100 times a second and tags each sample with the running
// goroutine's labels; a phase's contender CPU is the sum of its labelled
// samples. Goroutines that neither the contender nor the harness start
// (the garbage collector's background workers) are not attributed: they are
// in the process figure, which getrusage gives for the same window.
const contenderLabel = "contender"

// labelled runs fn with the contender's pprof label, so every goroutine fn
// starts is attributed to the contender.
func labelled(ctx context.Context, contender string, fn func(ctx context.Context)) {
	pprof.Do(ctx, pprof.Labels(contenderLabel, contender), fn)
}

// withOwnTransport gives cfg a dialer of its own: client-go then builds a
// transport (and connections) for it instead of sharing the cached one of
// the harness's clients, so the connections' goroutines are the
// contender's.
func withOwnTransport(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	out.Dial = d.DialContext
	return out
}

// cpuMeter measures one phase's CPU: the process's (getrusage: user +
// system of every thread), the contender's labelled share and the control
// plane's (kube-apiserver and etcd, from /proc).
type cpuMeter struct {
	buf      bytes.Buffer
	process0 time.Duration
	profiler bool
	// pids are the control plane's processes; controlPlane0 their CPU at
	// the start (negative: not measured).
	pids          []int
	controlPlane0 time.Duration
	// save, when set, is where stop writes the phase's profile.
	save string
	// server, when set, profiles the kube-apiserver over the phase; stop
	// writes its profile and reports a failure to log.
	server *serverProfiler
	log    io.Writer
}

// startCPU starts measuring. When the CPU profiler is already in use (the
// command's --cpuprofile), the contender's share is not measured.
func startCPU() *cpuMeter {
	m := &cpuMeter{process0: processCPU()}
	m.profiler = pprof.StartCPUProfile(&m.buf) == nil
	return m
}

// startCPU is startCPU for the runner's current scenario and contender,
// saving the phase's profile when [Options.PhaseProfiles] asks for it.
func (r *runner) startCPU() *cpuMeter {
	m := startCPU()
	m.controlPlane0 = -1
	if r.cl != nil && r.cl.env != nil {
		for _, c := range []testenv.Component{testenv.APIServer, testenv.Etcd} {
			if pid, err := r.cl.env.PID(c); err == nil {
				m.pids = append(m.pids, pid)
			}
		}
		if len(m.pids) == 2 {
			m.controlPlane0 = processesCPU(m.pids)
		}
	}
	if r.o.PhaseProfiles != "" {
		m.save = filepath.Join(r.o.PhaseProfiles, fmt.Sprintf("cpu-%s-%s-%d.pprof", r.scenario, r.contender, r.o.Settings.N))
		if r.cl != nil && r.cl.env != nil {
			m.log = r.o.Log
			path := filepath.Join(r.o.PhaseProfiles, fmt.Sprintf("cpu-apiserver-%s-%s-%d.pprof", r.scenario, r.contender, r.o.Settings.N))
			var err error
			if m.server, err = startServerProfile(harnessConfig(r.cl.env.Config), path); err != nil {
				logf(r.o.Log, "   kube-apiserver CPU profile not taken: %v", err)
			}
		}
	}
	return m
}

// cpuFigures are one phase's CPU seconds: the contender's goroutines' (NaN
// when the profiler was unavailable), the whole process's, and the control
// plane's (kube-apiserver + etcd; NaN when their processes were not found).
type cpuFigures struct {
	contender, process, controlPlane float64
}

// stop ends the measurement and returns its figures.
func (m *cpuMeter) stop(contender string) cpuFigures {
	f := cpuFigures{contender: math.NaN(), process: (processCPU() - m.process0).Seconds(), controlPlane: math.NaN()}
	if m.controlPlane0 >= 0 {
		f.controlPlane = (processesCPU(m.pids) - m.controlPlane0).Seconds()
	}
	f.contender = m.contenderSeconds(contender)
	if m.server != nil {
		// After the figures: waiting for the server's last chunk adds
		// nothing to them.
		if err := m.server.stop(); err != nil {
			logf(m.log, "   %v", err)
		}
		m.server = nil
	}
	return f
}

// contenderSeconds stops the profiler and sums the samples labelled with
// contender (NaN when the profiler was unavailable).
func (m *cpuMeter) contenderSeconds(contender string) float64 {
	if !m.profiler {
		return math.NaN()
	}
	pprof.StopCPUProfile()
	if m.save != "" {
		// Best effort: a profile that cannot be written loses no figure.
		_ = os.WriteFile(m.save, m.buf.Bytes(), 0o600)
	}
	p, err := profile.Parse(&m.buf)
	if err != nil {
		return math.NaN()
	}
	idx := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" && st.Unit == "nanoseconds" {
			idx = i
		}
	}
	if idx < 0 {
		return math.NaN()
	}
	var ns int64
	for _, s := range p.Sample {
		if slices.Contains(s.Label[contenderLabel], contender) {
			ns += s.Value[idx]
		}
	}
	return float64(ns) / 1e9
}

// processCPU is the user and system CPU time of the whole process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// processesCPU is the user and system CPU time the processes pids used so
// far, from fields 14 and 15 of /proc/<pid>/stat (in USER_HZ ticks, 100 a
// second on Linux: a 10 ms resolution); a process that cannot be read
// counts 0.
func processesCPU(pids []int) time.Duration {
	var ticks int64
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// The command name (field 2) is in parentheses and may hold
		// spaces: fields are counted after its closing parenthesis.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(b[i+1:]))
		// fields[0] is field 3 (state): utime is field 14, stime 15.
		if len(fields) < 13 {
			continue
		}
		for _, f := range fields[11:13] {
			v, err := strconv.ParseInt(f, 10, 64)
			if err == nil {
				ticks += v
			}
		}
	}
	return time.Duration(ticks) * (time.Second / 100)
}
