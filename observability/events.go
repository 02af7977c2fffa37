package observability

import (
	"fmt"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Reason is the machine-readable reason of an Event: a short UpperCamelCase
// word such as "ProvisioningFailed". Declare each reason a controller emits as
// a constant of this type, so the set is fixed at compile time and documented
// in one place; Event consumers (alerts, `kubectl events --for`) match on it.
type Reason string

// EventRecorder writes events.k8s.io/v1 Events. The recorder returned by
// controller-runtime's manager.GetEventRecorder(name) satisfies it, as does
// client-go's tools/events recorder.
type EventRecorder interface {
	Eventf(regarding runtime.Object, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

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
	// DefaultAction is the events.k8s.io/v1 action of Events recorded with
	// [Recorder.Normal] and [Recorder.Warning].
	DefaultAction = "Reconcile"
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
	rec      EventRecorder
	action   string
	interval time.Duration
	burst    int
	clock    clock.PassiveClock

	mu    sync.Mutex
	cache *lru[dedupKey, *dedupState]

	recorded, suppressed atomic.Uint64
}

type dedupKey struct {
	uid    types.UID
	reason Reason
}

type dedupState struct {
	lastHash    uint64
	lastAt      time.Time
	windowStart time.Time
	inWindow    int
}

// RecorderOption configures [NewRecorder].
type RecorderOption func(*Recorder)

// DedupInterval sets how long an identical Event is suppressed and the window
// over which [DedupBurst] applies (default [DefaultDedupInterval]). Zero or a
// negative value disables deduplication.
func DedupInterval(d time.Duration) RecorderOption { return func(r *Recorder) { r.interval = d } }

// DedupBurst sets how many Events per (object UID, reason) are recorded per
// interval, whatever their messages (default [DefaultDedupBurst]; minimum 1).
func DedupBurst(n int) RecorderOption {
	return func(r *Recorder) { r.burst = max(n, 1) }
}

// DedupCacheSize caps the deduplication cache (default [DefaultDedupCacheSize]; minimum 1).
func DedupCacheSize(n int) RecorderOption {
	return func(r *Recorder) { r.cache = newLRU[dedupKey, *dedupState](n) }
}

// EventAction sets the events.k8s.io/v1 action used by [Recorder.Normal] and
// [Recorder.Warning] (default [DefaultAction]).
func EventAction(action string) RecorderOption { return func(r *Recorder) { r.action = action } }

// RecorderClock replaces the clock deduplication reads, for tests.
func RecorderClock(c clock.PassiveClock) RecorderOption { return func(r *Recorder) { r.clock = c } }

// NewRecorder wraps rec with deduplication.
func NewRecorder(rec EventRecorder, opts ...RecorderOption) *Recorder {
	r := &Recorder{
		rec:      rec,
		action:   DefaultAction,
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

// Normal records a Normal Event on obj unless deduplication suppresses it,
// and reports whether it was recorded.
func (r *Recorder) Normal(obj client.Object, reason Reason, messageFmt string, args ...any) bool {
	return r.Event(obj, corev1.EventTypeNormal, reason, r.action, messageFmt, args...)
}

// Warning records a Warning Event on obj unless deduplication suppresses it,
// and reports whether it was recorded.
func (r *Recorder) Warning(obj client.Object, reason Reason, messageFmt string, args ...any) bool {
	return r.Event(obj, corev1.EventTypeWarning, reason, r.action, messageFmt, args...)
}

// Event records an Event of eventType (Normal or Warning) on obj unless
// deduplication suppresses it, and reports whether it was handed to the
// underlying recorder. Messages longer than the API server accepts (1 KiB)
// are truncated rather than rejected. Objects without a UID (not yet created)
// are deduplicated by kind, namespace and name.
//
// The underlying events.k8s.io/v1 recorder of client-go aggregates Events
// with the same reason and action on the same object into one EventSeries for
// six minutes, keeping the FIRST message; give distinct situations distinct
// reasons so a later, different message is not hidden.
func (r *Recorder) Event(obj client.Object, eventType string, reason Reason, action, messageFmt string, args ...any) bool {
	note := messageFmt
	if len(args) > 0 {
		note = fmt.Sprintf(messageFmt, args...)
	}
	note = truncateUTF8(note, maxNoteBytes)
	if !r.admit(obj, eventType, reason, action, note) {
		r.suppressed.Add(1)
		return false
	}
	r.recorded.Add(1)
	// note is already formatted: pass it as an argument so a '%' in it is not re-interpreted.
	r.rec.Eventf(obj, nil, eventType, string(reason), action, "%s", note)
	return true
}

// Stats reports how many Events were handed to the underlying recorder and
// how many were suppressed since the Recorder was built.
func (r *Recorder) Stats() (recorded, suppressed uint64) {
	return r.recorded.Load(), r.suppressed.Load()
}

func (r *Recorder) admit(obj client.Object, eventType string, reason Reason, action, note string) bool {
	if r.interval <= 0 {
		return true
	}
	uid := obj.GetUID()
	if uid == "" {
		uid = types.UID(fmt.Sprintf("%T/%s/%s", obj, obj.GetNamespace(), obj.GetName()))
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
