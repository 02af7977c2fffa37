package cloud

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Bucket states.
const (
	// StateAvailable is a bucket that exists and can be used.
	StateAvailable = "Available"
	// StateDeleting is a bucket whose deletion was accepted; it is gone (404)
	// once the server's delete delay has passed.
	StateDeleting = "Deleting"
)

// Quota classes a bucket can have.
const (
	QuotaSmall    = "small"
	QuotaStandard = "standard"
	QuotaLarge    = "large"
)

// Regions the server accepts.
var Regions = []string{"eu-west-1", "us-east-1", "ap-south-1"}

// Error codes the server returns, in the "code" field of an error body.
const (
	CodeNoSuchBucket                = "NoSuchBucket"
	CodeInvalidBucketName           = "InvalidBucketName"
	CodeInvalidArgument             = "InvalidArgument"
	CodeBucketAlreadyExists         = "BucketAlreadyExists"
	CodeIdempotentParameterMismatch = "IdempotentParameterMismatch"
	CodeOperationAborted            = "OperationAborted"
	CodeQuotaExceeded               = "QuotaExceeded"
	CodeAccessDenied                = "AccessDenied"
	CodeInvalidAccessKey            = "InvalidAccessKey"
	CodeSlowDown                    = "SlowDown"
	CodeServiceUnavailable          = "ServiceUnavailable"
	CodeInternalError               = "InternalError"
)

// Operation names, as recorded in [Call.Op].
const (
	OpCreate = "CreateBucket"
	OpGet    = "GetBucket"
	OpList   = "ListBuckets"
	OpUpdate = "UpdateBucket"
	OpDelete = "DeleteBucket"
)

// Bucket is a bucket as the API returns it to its owner.
type Bucket struct {
	Name       string `json:"name"`
	Region     string `json:"region"`
	Versioning bool   `json:"versioning"`
	QuotaClass string `json:"quotaClass"`
	// ClientToken is the Idempotency-Key of the create that made the bucket;
	// a client recognises its own bucket by it.
	ClientToken string `json:"clientToken"`
	State       string `json:"state"`
	// Endpoint is where the bucket's data is served.
	Endpoint string `json:"endpoint"`
	// AccessKeyID and SecretAccessKey are the bucket's own credentials,
	// issued at creation.
	AccessKeyID     string    `json:"accessKeyId"`
	SecretAccessKey string    `json:"secretAccessKey"`
	CreatedAt       time.Time `json:"createdAt"`
}

// CreateRequest is the body of CreateBucket.
type CreateRequest struct {
	Name       string `json:"name"`
	Region     string `json:"region"`
	Versioning bool   `json:"versioning"`
	// QuotaClass defaults to "standard".
	QuotaClass string `json:"quotaClass,omitempty"`
}

// UpdateRequest is the body of UpdateBucket; nil fields are left as they are.
type UpdateRequest struct {
	Versioning *bool   `json:"versioning,omitempty"`
	QuotaClass *string `json:"quotaClass,omitempty"`
}

// Faults is the body of POST /admin/faults. Zero fields change nothing.
type Faults struct {
	// FailNext makes the next FailNext /v1 calls fail with FailStatus (default 503).
	FailNext   int `json:"failNext,omitempty"`
	FailStatus int `json:"failStatus,omitempty"`
	// ThrottleNext makes the next ThrottleNext /v1 calls answer 429 with
	// Retry-After RetryAfterSeconds (default 1).
	ThrottleNext      int `json:"throttleNext,omitempty"`
	RetryAfterSeconds int `json:"retryAfterSeconds,omitempty"`
	// SlowNext delays the next SlowNext /v1 calls by SlowFor before they are
	// handled (to provoke client timeouts); the call still takes effect.
	SlowNext int    `json:"slowNext,omitempty"`
	SlowFor  string `json:"slowFor,omitempty"`
	// Latency, when set, is added to every /v1 call from now on ("0s" clears it).
	Latency string `json:"latency,omitempty"`
}

// Call is one /v1 request as the server saw it.
type Call struct {
	// At is when the request arrived.
	At time.Time `json:"at"`
	// Op is one of the Op constants, or "Unknown".
	Op string `json:"op"`
	// Bucket is the bucket (or queue) named in the path or the create body, if any.
	Bucket    string `json:"bucket,omitempty"`
	AccessKey string `json:"accessKey,omitempty"`
	// Status is the HTTP status of the answer. For CreateBucket, 201 means
	// this call made the bucket and 200 that it replayed an earlier create
	// with the same token: counting 201s counts buckets made.
	Status int `json:"status"`
}

// record is a bucket as the server stores it.
type record struct {
	Bucket
	Owner    string    `json:"owner"`
	DeleteAt time.Time `json:"deleteAt,omitzero"`
}

type state struct {
	Buckets []record      `json:"buckets"`
	Queues  []queueRecord `json:"queues,omitempty"`
}

// Option configures [NewServer].
type Option func(*Server)

// WithAccount adds an account; only its access key and secret key
// authenticate. A server without accounts rejects every /v1 call.
func WithAccount(accessKey, secretKey string) Option {
	return func(s *Server) { s.accounts[accessKey] = secretKey }
}

// WithStateFile persists buckets to path (JSON), loading it if it exists.
func WithStateFile(path string) Option { return func(s *Server) { s.statePath = path } }

// WithMaxBuckets caps the buckets per account (default 10); creating one more
// is 403 QuotaExceeded. Buckets being deleted still count.
func WithMaxBuckets(n int) Option { return func(s *Server) { s.maxBuckets = n } }

// WithRateLimit limits each access key to perSecond calls on average with
// bursts of burst (default: unlimited). Calls over the limit get 429 SlowDown
// with Retry-After: the whole seconds until a call would be admitted, at least 1.
func WithRateLimit(perSecond float64, burst int) Option {
	return func(s *Server) { s.rate, s.burst = perSecond, float64(max(burst, 1)) }
}

// WithLatency adds d to every /v1 call.
func WithLatency(d time.Duration) Option { return func(s *Server) { s.latency = d } }

// WithDeleteDelay keeps a deleted bucket visible in state Deleting for d
// (default 0: gone at once).
func WithDeleteDelay(d time.Duration) Option { return func(s *Server) { s.deleteDelay = d } }

// WithCreateHook calls hook with every bucket CreateBucket makes (a 201, not
// a replay), after it is stored and persisted and before the answer is sent:
// the moment the cloud has the bucket and the caller does not know it yet.
// A test kills the caller there (a crash between an external create and the
// write that records it). The hook runs with the server locked: it must not
// call the server, and the answer waits for it to return.
func WithCreateHook(hook func(Bucket)) Option { return func(s *Server) { s.createHook = hook } }

// Server is the fake cloud. Build it with [NewServer]; serve it with
// [Server.Start] or mount [Server.Handler]. It is safe for concurrent use.
type Server struct {
	accounts    map[string]string
	statePath   string
	maxBuckets  int
	rate, burst float64
	deleteDelay time.Duration
	createHook  func(Bucket)

	mu       sync.Mutex
	buckets  map[string]*record
	queues   map[string]*queueRecord
	limiters map[string]*tokenBucket
	latency  time.Duration
	faults   pending
	calls    []Call
	baseURL  string
	srv      *http.Server
}

type pending struct {
	fail, failStatus int
	throttle         int
	retryAfter       time.Duration
	slow             int
	slowFor          time.Duration
	slowOps          []string
}

// NewServer returns a server with opts applied and the state file, if any, loaded.
func NewServer(opts ...Option) (*Server, error) {
	s := &Server{
		accounts:   map[string]string{},
		maxBuckets: 10,
		buckets:    map[string]*record{},
		queues:     map[string]*queueRecord{},
		limiters:   map[string]*tokenBucket{},
	}
	for _, o := range opts {
		o(s)
	}
	if s.statePath != "" {
		data, err := os.ReadFile(s.statePath)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("cloud: read state: %w", err)
		default:
			var st state
			if err := json.Unmarshal(data, &st); err != nil {
				return nil, fmt.Errorf("cloud: parse state %s: %w", s.statePath, err)
			}
			for i := range st.Buckets {
				r := st.Buckets[i]
				s.buckets[r.Name] = &r
			}
			for i := range st.Queues {
				q := st.Queues[i]
				s.queues[q.Name] = &q
			}
		}
	}
	return s, nil
}

// Start serves the API on addr (e.g. "127.0.0.1:0") in the background and
// returns its base URL, e.g. "http://127.0.0.1:41234". Stop it with [Server.Close].
func (s *Server) Start(addr string) (string, error) {
	var lc net.ListenConfig
	l, err := lc.Listen(context.Background(), "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("cloud: listen: %w", err)
	}
	base := "http://" + l.Addr().String()
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	s.mu.Lock()
	s.baseURL, s.srv = base, srv
	s.mu.Unlock()
	go func() { _ = srv.Serve(l) }()
	return base, nil
}

// Close stops a server started with [Server.Start]; requests in flight are cut.
func (s *Server) Close() error {
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	return srv.Close()
}

// Handler returns the HTTP handler of the API and the admin endpoints.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/buckets", s.v1(OpCreate, s.create))
	mux.HandleFunc("GET /v1/buckets", s.v1(OpList, s.list))
	mux.HandleFunc("GET /v1/buckets/{name}", s.v1(OpGet, s.get))
	mux.HandleFunc("PATCH /v1/buckets/{name}", s.v1(OpUpdate, s.update))
	mux.HandleFunc("DELETE /v1/buckets/{name}", s.v1(OpDelete, s.remove))
	s.routeQueues(mux)
	mux.HandleFunc("POST /admin/faults", s.adminFaults)
	mux.HandleFunc("GET /admin/calls", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, s.Calls()) })
	return mux
}

// FailNext makes the next n /v1 calls fail with status (503 when 0), before
// they take effect.
func (s *Server) FailNext(n, status int) {
	if status == 0 {
		status = http.StatusServiceUnavailable
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.fail, s.faults.failStatus = n, status
}

// ThrottleNext makes the next n /v1 calls answer 429 SlowDown with
// Retry-After retryAfter (rounded up to whole seconds, at least 1).
func (s *Server) ThrottleNext(n int, retryAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.throttle, s.faults.retryAfter = n, retryAfter
}

// SlowNext delays the next n /v1 calls of the operations ops (all when none
// are given) by d before they are handled. A client that times out meanwhile
// does not stop the call: it still takes effect.
func (s *Server) SlowNext(n int, d time.Duration, ops ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.slow, s.faults.slowFor, s.faults.slowOps = n, d, ops
}

// SetLatency adds d to every /v1 call from now on.
func (s *Server) SetLatency(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latency = d
}

// Calls returns a copy of the call log, oldest first.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// CallCount counts the logged calls of operation op ("" counts all).
func (s *Server) CallCount(op string) int {
	n := 0
	for _, c := range s.Calls() {
		if op == "" || c.Op == op {
			n++
		}
	}
	return n
}

// Buckets returns every bucket of every account (deleting ones included),
// sorted by name, as their owners see them.
func (s *Server) Buckets() []Bucket {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked(time.Now())
	out := make([]Bucket, 0, len(s.buckets))
	for _, r := range s.buckets {
		out = append(out, r.Bucket)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Get returns the named bucket, if it exists (deleting or not).
func (s *Server) Get(name string) (Bucket, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked(time.Now())
	r, ok := s.buckets[name]
	if !ok {
		return Bucket{}, false
	}
	return r.Bucket, true
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// handlerFunc handles an authenticated, admitted /v1 call of owner; it may
// name the bucket in call.
type handlerFunc func(w http.ResponseWriter, r *http.Request, owner string, call *Call)

// v1 wraps an API handler with the call log, authentication, rate limiting
// and fault injection, in that order.
func (s *Server) v1(op string, h handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		call := Call{At: time.Now(), Op: op, Bucket: r.PathValue("name")}
		key, secret, _ := strings.Cut(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), ":")
		call.AccessKey = key
		defer func() {
			call.Status = sw.status
			s.mu.Lock()
			s.calls = append(s.calls, call)
			s.mu.Unlock()
		}()
		if want, ok := s.accounts[key]; !ok || want != secret || secret == "" {
			writeError(sw, http.StatusUnauthorized, CodeInvalidAccessKey, "the access key or secret key is not valid")
			return
		}
		delay, fault := s.admit(key, op, call.At)
		if fault != nil {
			fault(sw)
			return
		}
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				// The client gave up; the call still takes effect, as with a real cloud.
			}
		}
		h(sw, r, key, &call)
	}
}

// admit applies rate limits and injected faults. It returns the delay before
// handling, or a function writing the fault's answer.
func (s *Server) admit(key, op string, now time.Time) (time.Duration, func(http.ResponseWriter)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rate > 0 {
		tb := s.limiters[key]
		if tb == nil {
			tb = &tokenBucket{tokens: s.burst, last: now}
			s.limiters[key] = tb
		}
		if wait := tb.take(now, s.rate, s.burst); wait > 0 {
			return 0, throttled(wait)
		}
	}
	if s.faults.throttle > 0 {
		s.faults.throttle--
		return 0, throttled(s.faults.retryAfter)
	}
	if s.faults.fail > 0 {
		s.faults.fail--
		status := s.faults.failStatus
		return 0, func(w http.ResponseWriter) {
			code := CodeServiceUnavailable
			if status != http.StatusServiceUnavailable {
				code = CodeInternalError
			}
			writeError(w, status, code, "injected failure: the service is temporarily unavailable")
		}
	}
	delay := s.latency
	if s.faults.slow > 0 && (len(s.faults.slowOps) == 0 || slices.Contains(s.faults.slowOps, op)) {
		s.faults.slow--
		delay += s.faults.slowFor
	}
	return delay, nil
}

func throttled(wait time.Duration) func(http.ResponseWriter) {
	secs := max(int(math.Ceil(wait.Seconds())), 1)
	return func(w http.ResponseWriter) {
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		writeError(w, http.StatusTooManyRequests, CodeSlowDown, fmt.Sprintf("request rate exceeded; retry after %ds", secs))
	}
}

// tokenBucket is a per-client rate limiter: tokens refill at rate per second
// up to burst; a call takes one.
type tokenBucket struct {
	tokens float64
	last   time.Time
}

// take takes a token, or returns how long until one is available.
func (b *tokenBucket) take(now time.Time, rate, burst float64) time.Duration {
	b.tokens = math.Min(burst, b.tokens+now.Sub(b.last).Seconds()*rate)
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return 0
	}
	return time.Duration((1 - b.tokens) / rate * float64(time.Second))
}

func (s *Server) adminFaults(w http.ResponseWriter, r *http.Request) {
	var f Faults
	if !decodeBody(w, r, &f) {
		return
	}
	parse := func(v string) (time.Duration, bool) {
		if v == "" {
			return 0, true
		}
		d, err := time.ParseDuration(v)
		return d, err == nil && d >= 0
	}
	slowFor, ok1 := parse(f.SlowFor)
	latency, ok2 := parse(f.Latency)
	if !ok1 || !ok2 {
		writeError(w, http.StatusBadRequest, CodeInvalidArgument, "slowFor and latency are Go durations such as 1.5s")
		return
	}
	if f.FailNext > 0 {
		s.FailNext(f.FailNext, f.FailStatus)
	}
	if f.ThrottleNext > 0 {
		s.ThrottleNext(f.ThrottleNext, time.Duration(max(f.RetryAfterSeconds, 1))*time.Second)
	}
	if f.SlowNext > 0 {
		s.SlowNext(f.SlowNext, slowFor)
	}
	if f.Latency != "" {
		s.SetLatency(latency)
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) create(w http.ResponseWriter, r *http.Request, owner string, call *Call) {
	var req CreateRequest
	if !decodeBody(w, r, &req) {
		return
	}
	call.Bucket = req.Name
	token := r.Header.Get("Idempotency-Key")
	if token == "" || len(token) > 128 {
		writeError(w, http.StatusBadRequest, CodeInvalidArgument, "an Idempotency-Key header of 1-128 characters is required")
		return
	}
	if err := ValidateName(req.Name); err != nil {
		writeError(w, http.StatusBadRequest, CodeInvalidBucketName, err.Error())
		return
	}
	if !validRegion(req.Region) {
		writeError(w, http.StatusBadRequest, CodeInvalidArgument, fmt.Sprintf("unknown region %q; known: %s", req.Region, strings.Join(Regions, ", ")))
		return
	}
	if req.QuotaClass == "" {
		req.QuotaClass = QuotaStandard
	}
	if !validQuotaClass(req.QuotaClass) {
		writeError(w, http.StatusBadRequest, CodeInvalidArgument, fmt.Sprintf("unknown quota class %q", req.QuotaClass))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.sweepLocked(now)
	if r, ok := s.buckets[req.Name]; ok {
		switch {
		case r.Owner != owner || r.ClientToken != token:
			writeError(w, http.StatusConflict, CodeBucketAlreadyExists, fmt.Sprintf("bucket %q already exists and was not created with this request token", req.Name))
		case r.Region != req.Region:
			writeError(w, http.StatusConflict, CodeIdempotentParameterMismatch, "the request token was used with different parameters")
		case r.State == StateDeleting:
			writeError(w, http.StatusConflict, CodeOperationAborted, fmt.Sprintf("bucket %q is being deleted", req.Name))
		default:
			writeJSON(w, http.StatusOK, r.Bucket) // a replay: the bucket this token created
		}
		return
	}
	owned := 0
	for _, r := range s.buckets {
		if r.Owner != owner {
			continue
		}
		owned++
		if r.ClientToken == token {
			writeError(w, http.StatusConflict, CodeIdempotentParameterMismatch, "the request token was already used for another bucket")
			return
		}
	}
	if owned >= s.maxBuckets {
		writeError(w, http.StatusForbidden, CodeQuotaExceeded, fmt.Sprintf("the account already has %d buckets, its quota", owned))
		return
	}
	rec := &record{Owner: owner, Bucket: Bucket{
		Name: req.Name, Region: req.Region, Versioning: req.Versioning, QuotaClass: req.QuotaClass,
		ClientToken: token, State: StateAvailable, Endpoint: s.baseURL + "/b/" + req.Name,
		AccessKeyID: "BK" + randomHex(8), SecretAccessKey: randomHex(20), CreatedAt: now.UTC().Truncate(time.Second),
	}}
	s.buckets[req.Name] = rec
	if err := s.persistLocked(); err != nil {
		delete(s.buckets, req.Name)
		writeError(w, http.StatusInternalServerError, CodeInternalError, "could not persist the bucket")
		return
	}
	if s.createHook != nil {
		s.createHook(rec.Bucket)
	}
	writeJSON(w, http.StatusCreated, rec.Bucket)
}

func (s *Server) list(w http.ResponseWriter, _ *http.Request, owner string, _ *Call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked(time.Now())
	out := []Bucket{}
	for _, r := range s.buckets {
		if r.Owner == owner {
			out = append(out, r.Bucket)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	writeJSON(w, http.StatusOK, out)
}

// lookupLocked finds the caller's bucket, writing 404 or 403 when it cannot.
func (s *Server) lookupLocked(w http.ResponseWriter, r *http.Request, owner string) *record {
	s.sweepLocked(time.Now())
	return lookupOwned(w, r, s.buckets, owner, "bucket", CodeNoSuchBucket)
}

// owned is a stored resource that belongs to one account.
type owned interface{ account() string }

func (r *record) account() string      { return r.Owner }
func (q *queueRecord) account() string { return q.Owner }

// lookupOwned finds the resource the request's {name} names in m: when it is
// missing it writes 404 with the code notFound, when another account owns it
// 403, and returns nil in both cases.
func lookupOwned[T owned](w http.ResponseWriter, r *http.Request, m map[string]T, owner, kind, notFound string) T {
	var none T
	name := r.PathValue("name")
	v, ok := m[name]
	if !ok {
		writeError(w, http.StatusNotFound, notFound, fmt.Sprintf("%s %q does not exist", kind, name))
		return none
	}
	if v.account() != owner {
		writeError(w, http.StatusForbidden, CodeAccessDenied, fmt.Sprintf("%s %q belongs to another account", kind, name))
		return none
	}
	return v
}

// decodeBody decodes the request's JSON body (at most 64 KiB) into v,
// writing 400 and returning false when it is malformed.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, CodeInvalidArgument, "malformed JSON body")
		return false
	}
	return true
}

func (s *Server) get(w http.ResponseWriter, r *http.Request, owner string, _ *Call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rec := s.lookupLocked(w, r, owner); rec != nil {
		writeJSON(w, http.StatusOK, rec.Bucket)
	}
}

func (s *Server) update(w http.ResponseWriter, r *http.Request, owner string, _ *Call) {
	var req UpdateRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if req.QuotaClass != nil && !validQuotaClass(*req.QuotaClass) {
		writeError(w, http.StatusBadRequest, CodeInvalidArgument, fmt.Sprintf("unknown quota class %q", *req.QuotaClass))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.lookupLocked(w, r, owner)
	if rec == nil {
		return
	}
	if rec.State == StateDeleting {
		writeError(w, http.StatusConflict, CodeOperationAborted, fmt.Sprintf("bucket %q is being deleted", rec.Name))
		return
	}
	before := *rec
	if req.Versioning != nil {
		rec.Versioning = *req.Versioning
	}
	if req.QuotaClass != nil {
		rec.QuotaClass = *req.QuotaClass
	}
	if err := s.persistLocked(); err != nil {
		*rec = before
		writeError(w, http.StatusInternalServerError, CodeInternalError, "could not persist the bucket")
		return
	}
	writeJSON(w, http.StatusOK, rec.Bucket)
}

func (s *Server) remove(w http.ResponseWriter, r *http.Request, owner string, _ *Call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.lookupLocked(w, r, owner)
	if rec == nil {
		return
	}
	if rec.State != StateDeleting {
		rec.State, rec.DeleteAt = StateDeleting, time.Now().Add(s.deleteDelay)
		s.sweepLocked(time.Now()) // with no delete delay the bucket is gone now
		if err := s.persistLocked(); err != nil {
			// Accepted in memory only: the client retries, and the retry is a no-op.
			writeError(w, http.StatusInternalServerError, CodeInternalError, "could not persist the deletion")
			return
		}
	}
	w.WriteHeader(http.StatusAccepted)
}

// sweepLocked removes buckets whose deletion has completed.
func (s *Server) sweepLocked(now time.Time) {
	changed := false
	for name, r := range s.buckets {
		if r.State == StateDeleting && !now.Before(r.DeleteAt) {
			delete(s.buckets, name)
			changed = true
		}
	}
	if changed {
		_ = s.persistLocked() // a failed write is retried by the next mutation
	}
}

func (s *Server) persistLocked() error {
	if s.statePath == "" {
		return nil
	}
	st := state{Buckets: make([]record, 0, len(s.buckets))}
	for _, r := range s.buckets {
		st.Buckets = append(st.Buckets, *r)
	}
	sort.Slice(st.Buckets, func(i, j int) bool { return st.Buckets[i].Name < st.Buckets[j].Name })
	for _, q := range s.queues {
		st.Queues = append(st.Queues, *q)
	}
	sort.Slice(st.Queues, func(i, j int) bool { return st.Queues[i].Name < st.Queues[j].Name })
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.statePath), ".cloud-state-*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // gone already after a successful rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), s.statePath)
}

// ValidateName checks a bucket name against the server's naming rules: 3 to
// 63 characters of lower-case letters, digits, '.' and '-', starting and
// ending with a letter or digit, no "..", not shaped like an IPv4 address,
// not starting with "xn--" and not ending with "-alias". The error says which
// rule the name breaks.
func ValidateName(name string) error {
	switch {
	case len(name) < 3 || len(name) > 63:
		return fmt.Errorf("bucket name %q must be 3 to 63 characters long", name)
	case strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789.-") != "":
		return fmt.Errorf("bucket name %q may contain only lower-case letters, digits, '.' and '-'", name)
	case !isAlnum(name[0]) || !isAlnum(name[len(name)-1]):
		return fmt.Errorf("bucket name %q must start and end with a letter or digit", name)
	case strings.Contains(name, ".."):
		return fmt.Errorf("bucket name %q must not contain \"..\"", name)
	case net.ParseIP(name) != nil:
		return fmt.Errorf("bucket name %q must not be an IP address", name)
	case strings.HasPrefix(name, "xn--"):
		return fmt.Errorf("bucket name %q must not start with the reserved prefix \"xn--\"", name)
	case strings.HasSuffix(name, "-alias"):
		return fmt.Errorf("bucket name %q must not end with the reserved suffix \"-alias\"", name)
	}
	return nil
}

func isAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

func validRegion(r string) bool { return slices.Contains(Regions, r) }

func validQuotaClass(q string) bool {
	return q == QuotaSmall || q == QuotaStandard || q == QuotaLarge
}

type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, errorBody{Code: code, Message: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return strings.ToUpper(hex.EncodeToString(b))
}
