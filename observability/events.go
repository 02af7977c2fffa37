package observability

import (
	"fmt"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
)

const (
	// DefaultDedupInterval is how long an identical Event (same object UID,
	// reason, type, action and message) is suppressed after it was recorded.
	DefaultDedupInterval = 5 * time.Minute
	// DefaultDedupBurst is how many Events per object UID and reason, whatever
	// their messages, are recorded per DefaultDedupInterval.
	DefaultDedupBurst = 5
	// DefaultDedupCacheSize caps the (object UID, reason) entries the
	// deduplication cache holds; the least recently used entry is evicted.
	DefaultDedupCacheSize = 4096
	// maxNoteBytes is the API server's limit on an Event's note
	// (events.k8s.io/v1) or message; a longer one makes the write fail.
	maxNoteBytes = 1024
)

// Recorder records Events on the objects a controller reconciles and keeps a
// retry loop from flooding the API server: for each (object UID, reason) it
// forwards an identical message at most once per interval and at most burst
// messages of any content per interval. Suppressed calls cost one map lookup
// and no API request. The state is an LRU of at most cacheSize entries, so
// memory stays bounded however many objects come and go; an evicted entry
// only means its next Event is recorded again.
//
// A Recorder is safe for concurrent use. The zero value is not usable; build
// one with [NewRecorder] or [Observability.Recorder].
type Recorder struct {
	rec      events.EventRecorder
	interval time.Duration
	burst    int
	clock    clock.PassiveClock

	mu    sync.Mutex
	cache *lru[dedupKey, *dedupState]

	recorded, suppressed atomic.Uint64
}

type dedupKey struct {
	uid    types.UID
	reason string
}

type dedupState struct {
	lastHash    uint64
	lastAt      time.Time
	windowStart time.Time
	inWindow    int
}

// RecorderOption configures [NewRecorder].
type RecorderOption func(*Recorder)

// WithDedupInterval sets how long an identical Event is suppressed and the
// window over which [WithDedupBurst] applies (default [DefaultDedupInterval]).
// Zero or a negative value disables deduplication.
func WithDedupInterval(d time.Duration) RecorderOption { return func(r *Recorder) { r.interval = d } }

// WithDedupBurst sets how many Events per (object UID, reason) are recorded
// per interval, whatever their messages (default [DefaultDedupBurst];
// minimum 1).
func WithDedupBurst(n int) RecorderOption {
	return func(r *Recorder) { r.burst = max(n, 1) }
}

// WithDedupCacheSize caps the deduplication cache (default
// [DefaultDedupCacheSize]; minimum 1).
func WithDedupCacheSize(n int) RecorderOption {
	return func(r *Recorder) { r.cache = newLRU[dedupKey, *dedupState](n) }
}

// WithClock replaces the clock deduplication reads (default: the wall clock).
func WithClock(c clock.PassiveClock) RecorderOption { return func(r *Recorder) { r.clock = c } }

// NewRecorder wraps rec with deduplication.
func NewRecorder(rec events.EventRecorder, opts ...RecorderOption) *Recorder {
	r := &Recorder{
		rec:      rec,
		interval: DefaultDedupInterval,
		burst:    DefaultDedupBurst,
		clock:    clock.RealClock{},
		cache:    newLRU[dedupKey, *dedupState](DefaultDedupCacheSize),
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Eventf records an Event of eventtype (Normal or Warning) regarding an
// object, as client-go's events.EventRecorder does — a Recorder is one, so
// every opkit package and controller-runtime code takes it — unless
// deduplication suppresses it. Messages longer than the API server accepts
// (1 KiB) are truncated rather than rejected. Objects without a UID (not yet
// created) are deduplicated by kind, namespace and name. A regarding value
// that is not an object with metadata is passed through undeduplicated.
//
// The underlying events.k8s.io/v1 recorder of client-go aggregates Events
// with the same reason and action on the same object into one EventSeries
// for a while; this Recorder additionally keeps the number of calls that
// reach it (and so of API requests) bounded per object and reason.
func (r *Recorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	if len(args) > 0 {
		note = fmt.Sprintf(note, args...)
	}
	note = truncateUTF8(note, maxNoteBytes)
	if obj, err := meta.Accessor(regarding); err == nil && !r.admit(regarding, obj, eventtype, reason, action, note) {
		r.suppressed.Add(1)
		return
	}
	r.recorded.Add(1)
	r.rec.Eventf(regarding, related, eventtype, reason, action, "%s", note)
}

// Stats reports how many Events were handed to the underlying recorder and
// how many were suppressed since the Recorder was built.
func (r *Recorder) Stats() (recorded, suppressed uint64) {
	return r.recorded.Load(), r.suppressed.Load()
}

func (r *Recorder) admit(regarding runtime.Object, obj metav1.Object, eventType, reason, action, note string) bool {
	if r.interval <= 0 {
		return true
	}
	uid := obj.GetUID()
	if uid == "" {
		uid = types.UID(fmt.Sprintf("%T/%s/%s", regarding, obj.GetNamespace(), obj.GetName()))
	}
	h := fnv.New64a()
	for _, s := range []string{eventType, action, note} {
		_, _ = h.Write([]byte(s))
		_, _ = h.Write([]byte{0})
	}
	sum := h.Sum64()
	now := r.clock.Now()

	r.mu.Lock()
	defer r.mu.Unlock()
	key := dedupKey{uid: uid, reason: reason}
	st, ok := r.cache.get(key)
	if !ok {
		r.cache.add(key, &dedupState{lastHash: sum, lastAt: now, windowStart: now, inWindow: 1})
		return true
	}
	if now.Sub(st.windowStart) >= r.interval {
		st.windowStart, st.inWindow = now, 0
	}
	if st.lastHash == sum && now.Sub(st.lastAt) < r.interval {
		return false
	}
	if st.inWindow >= r.burst {
		return false
	}
	st.lastHash, st.lastAt = sum, now
	st.inWindow++
	return true
}

func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "..."
	cut := n - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}
