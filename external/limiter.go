package external

import (
	"math"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Limiter paces the calls of every object to one endpoint: a token bucket
// per endpoint (perSecond on average, bursts of burst) and, per endpoint,
// the Retry-After an answer asked for. Share one Limiter between all the
// Reconcilers (and processes' objects) that call the same endpoint: the
// endpoint's limit is the account's, not one object's.
//
// Guarantees, per endpoint key:
//
//   - Calls are admitted at most burst at once and perSecond on average:
//     over any window of w seconds at most burst + perSecond·w calls.
//   - After [Limiter.Throttle](key, d) no call is admitted before d has
//     passed (an earlier, longer wait is never shortened).
//   - A call that would have to wait longer than the Reconciler's maximum
//     wait ([WithMaxWait]) is not admitted and takes no token: the object is
//     requeued with reason [ReasonThrottled] instead of holding a worker.
//
// perSecond ≤ 0 means no rate limit (Retry-After is still honoured). The
// zero value is not usable; use [NewLimiter]. A Limiter is safe for
// concurrent use.
type Limiter struct {
	rate, burst float64
	clock       clock.WithTicker

	mu        sync.Mutex
	endpoints map[string]*endpointState
}

type endpointState struct {
	tokens float64
	last   time.Time
	until  time.Time // Retry-After
}

// LimiterOption configures [NewLimiter].
type LimiterOption interface{ applyToLimiter(*Limiter) }

// NewLimiter returns a Limiter admitting perSecond calls per endpoint on
// average, in bursts of at most burst (at least 1).
func NewLimiter(perSecond float64, burst int, opts ...LimiterOption) *Limiter {
	l := &Limiter{rate: perSecond, burst: float64(max(burst, 1)), clock: clock.RealClock{}, endpoints: map[string]*endpointState{}}
	for _, o := range opts {
		o.applyToLimiter(l)
	}
	return l
}

// Reserve admits one call to endpoint key, now or after the returned wait,
// if that wait is at most maxWait; the caller must then wait it before
// calling. Otherwise it returns ok=false and the time until a call could be
// admitted, and takes nothing.
func (l *Limiter) Reserve(key string, maxWait time.Duration) (wait time.Duration, ok bool) {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.endpoints[key]
	if st == nil {
		st = &endpointState{tokens: l.burst, last: now}
		l.endpoints[key] = st
	}
	if now.Before(st.until) {
		return st.until.Sub(now), false
	}
	if l.rate <= 0 {
		return 0, true
	}
	st.tokens = math.Min(l.burst, st.tokens+now.Sub(st.last).Seconds()*l.rate)
	st.last = now
	st.tokens--
	if st.tokens >= 0 {
		return 0, true
	}
	wait = time.Duration(-st.tokens / l.rate * float64(time.Second))
	if wait > maxWait {
		st.tokens++ // not taken
		return wait, false
	}
	return wait, true
}

// Throttle closes endpoint key for d from now (an answer's Retry-After),
// never shortening an earlier wait.
func (l *Limiter) Throttle(key string, d time.Duration) {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.endpoints[key]
	if st == nil {
		st = &endpointState{tokens: l.burst, last: now}
		l.endpoints[key] = st
	}
	if until := now.Add(d); until.After(st.until) {
		st.until = until
	}
}

// ThrottledFor returns how long endpoint key is still closed by a
// Retry-After (0 when it is open).
func (l *Limiter) ThrottledFor(key string) time.Duration {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if st := l.endpoints[key]; st != nil && now.Before(st.until) {
		return st.until.Sub(now)
	}
	return 0
}
