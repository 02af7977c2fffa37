package observability

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
)

// CacheSyncer is the part of controller-runtime's cache.Cache readiness needs.
type CacheSyncer interface {
	WaitForCacheSync(ctx context.Context) bool
}

// cacheSyncWait bounds how long one readiness probe waits for the cache.
const cacheSyncWait = 100 * time.Millisecond

// CacheSyncCheck returns a readiness check that fails until c is started and
// every informer it holds has synced, and passes after that. Informers added
// later (a new watch) make it fail again until they sync. Each probe waits at
// most 100ms.
func CacheSyncCheck(c CacheSyncer) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), cacheSyncWait)
		defer cancel()
		if !c.WaitForCacheSync(ctx) {
			return errors.New("informer caches have not synced")
		}
		return nil
	}
}

// ControllerStatus is one controller's entry in the debug endpoint's JSON.
type ControllerStatus struct {
	// Name is the controller's name as given to [Observability.Wrap].
	Name string `json:"name"`
	// QueueDepth is the controller's workqueue depth, summed over priorities,
	// as controller-runtime last reported it in workqueue_depth; -1 when the
	// metric is not available (e.g. the controller has not started).
	QueueDepth float64 `json:"queueDepth"`
	// Reconciles counts reconciles finished since start-up.
	Reconciles uint64 `json:"reconciles"`
	// LastReconcileStart is when the last finished reconcile started; absent before the first.
	LastReconcileStart *time.Time `json:"lastReconcileStart,omitempty"`
	// LastReconcileSeconds is how long the last finished reconcile took.
	LastReconcileSeconds float64 `json:"lastReconcileSeconds"`
	// LastResult is the class of the last finished reconcile ("" before the first).
	LastResult string `json:"lastResult"`
}

// DebugReport is the debug endpoint's JSON document.
type DebugReport struct {
	Controllers []ControllerStatus `json:"controllers"`
}

// controllerStatuses keeps the last reconcile per wrapped controller: a fixed
// number of entries (one per controller), never per object.
type controllerStatuses struct {
	mu sync.Mutex
	m  map[string]*ControllerStatus
}

func (s *controllerStatuses) register(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[name]; !ok {
		s.m[name] = &ControllerStatus{Name: name}
	}
}

func (s *controllerStatuses) observe(name, class string, start time.Time, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.m[name]
	if !ok {
		st = &ControllerStatus{Name: name}
		s.m[name] = st
	}
	st.Reconciles++
	t := start
	st.LastReconcileStart = &t
	st.LastReconcileSeconds = d.Seconds()
	st.LastResult = class
}

func (s *controllerStatuses) snapshot() []ControllerStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ControllerStatus, 0, len(s.m))
	for _, st := range s.m {
		out = append(out, *st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// queueDepths sums controller-runtime's workqueue_depth by its controller label.
func queueDepths(g prometheus.Gatherer) map[string]float64 {
	out := map[string]float64{}
	if g == nil {
		return out
	}
	// Gather reports errors alongside whatever families it could collect;
	// the debug page shows what there is.
	mfs, _ := g.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "workqueue_depth" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" {
					out[l.GetValue()] += m.GetGauge().GetValue()
				}
			}
		}
	}
	return out
}

func (o *Observability) debugReport() DebugReport {
	depths := queueDepths(o.gatherer)
	ctrls := o.status.snapshot()
	for i := range ctrls {
		if d, ok := depths[ctrls[i].Name]; ok {
			ctrls[i].QueueDepth = d
		} else {
			ctrls[i].QueueDepth = -1
		}
	}
	return DebugReport{Controllers: ctrls}
}

// DebugHandler serves a [DebugReport] as JSON: per wrapped controller, its
// queue depth and last reconcile. [Setup] mounts it on the manager's metrics
// server at the debug path unless turned off.
func (o *Observability) DebugHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(o.debugReport())
	})
}
