package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/google/pprof/profile"
	"k8s.io/client-go/rest"
)

// serverProfileChunk is the length, in seconds, of each CPU profile the
// kube-apiserver is asked for while a phase runs. Its pprof handler takes a
// fixed duration, and a phase's length is not known when it starts, so the
// phase is covered by consecutive profiles merged at its end; the last one
// runs on past the phase by less than a chunk.
const serverProfileChunk = 1

// serverProfiler records the kube-apiserver's CPU profile over one phase,
// from its /debug/pprof/profile endpoint (on by default; the harness's
// admin user may read it), for [Options.PhaseProfiles]. What it shows is
// where the server's CPU goes by handler — a PATCH against an UPDATE, a
// watch's encoding, etcd's client — which the control-plane CPU figure
// only sums. The chunks go to disk as they come (path.partN), so the
// benchmark's own heap, which the restart phase measures, holds none of
// them.
type serverProfiler struct {
	path   string
	cancel context.CancelFunc
	done   chan struct{}
	// parts and err are written by the profiling goroutine only, and read
	// after done is closed.
	parts []string
	err   error
}

// startServerProfile starts profiling the API server behind cfg in
// consecutive chunks until stop, which writes their merge to path.
func startServerProfile(cfg *rest.Config, path string) (*serverProfiler, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", strings.TrimSuffix(cfg.Host, "/"), serverProfileChunk)
	ctx, cancel := context.WithCancel(context.Background())
	p := &serverProfiler{path: path, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		// Its connection's buffers would otherwise stay in the heap the
		// restart phase measures.
		defer hc.CloseIdleConnections()
		for ctx.Err() == nil {
			raw, err := get(hc, url)
			if err == nil {
				part := fmt.Sprintf("%s.part%d", path, len(p.parts))
				if err = os.WriteFile(part, raw, 0o600); err == nil {
					p.parts = append(p.parts, part)
				}
			}
			if err != nil {
				p.err = err
				return
			}
		}
	}()
	return p, nil
}

// stop waits for the chunk in flight and writes the merged profile.
func (p *serverProfiler) stop() error {
	p.cancel()
	<-p.done
	defer func() {
		for _, part := range p.parts {
			_ = os.Remove(part)
		}
	}()
	if p.err != nil {
		return fmt.Errorf("kube-apiserver CPU profile: %w", p.err)
	}
	var profs []*profile.Profile
	for _, part := range p.parts {
		raw, err := os.ReadFile(part)
		if err != nil {
			return err
		}
		prof, err := profile.Parse(bytes.NewReader(raw))
		if err != nil {
			return fmt.Errorf("kube-apiserver CPU profile %s: %w", part, err)
		}
		profs = append(profs, prof)
	}
	if len(profs) == 0 {
		return errors.New("kube-apiserver CPU profile: no chunk completed")
	}
	merged, err := profile.Merge(profs)
	if err != nil {
		return fmt.Errorf("kube-apiserver CPU profile: merge: %w", err)
	}
	f, err := os.Create(p.path)
	if err != nil {
		return err
	}
	if err := merged.Write(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// get returns the body of a GET of url, or an error for any status but 200.
// It is not cancelled with the phase (a chunk cut short returns no profile),
// only bounded, so a stuck server cannot hold up the benchmark.
func get(hc *http.Client, url string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), serverProfileChunk*time.Second+30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, bytes.TrimSpace(body))
	}
	return body, nil
}
