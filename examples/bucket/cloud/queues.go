package cloud

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
)

// Queue operations, as recorded in [Call.Op]. They share the account's rate
// limit with the bucket operations.
const (
	OpCreateQueue = "CreateQueue"
	OpGetQueue    = "GetQueue"
	OpUpdateQueue = "UpdateQueue"
	OpDeleteQueue = "DeleteQueue"
)

// Queue error codes.
const (
	CodeNoSuchQueue      = "NoSuchQueue"
	CodeInvalidQueueName = "InvalidQueueName"
	CodeQueueExists      = "QueueAlreadyExists"
)

// Queue is a message queue as the API returns it to its owner. Unlike a
// bucket, a deleted queue is gone at once, and its attributes have
// server-side defaults a client may leave out.
type Queue struct {
	Name string `json:"name"`
	// FIFO queues keep order; fixed at creation.
	FIFO bool `json:"fifo"`
	// RetentionSeconds is how long a message is kept (default 345600: 4 days).
	RetentionSeconds int `json:"retentionSeconds"`
	// VisibilityTimeoutSeconds is how long a received message stays hidden (default 30).
	VisibilityTimeoutSeconds int `json:"visibilityTimeoutSeconds"`
	// ClientToken is the Idempotency-Key of the create that made the queue.
	ClientToken string `json:"clientToken"`
	// URL is where the queue is used; AccessToken authorises its use.
	URL         string `json:"url"`
	AccessToken string `json:"accessToken"`
}

// CreateQueueRequest is the body of CreateQueue; zero attributes take the
// server's defaults.
type CreateQueueRequest struct {
	Name                     string `json:"name"`
	FIFO                     bool   `json:"fifo"`
	RetentionSeconds         int    `json:"retentionSeconds,omitempty"`
	VisibilityTimeoutSeconds int    `json:"visibilityTimeoutSeconds,omitempty"`
}

// UpdateQueueRequest is the body of UpdateQueue; nil fields are left as they are.
type UpdateQueueRequest struct {
	RetentionSeconds         *int `json:"retentionSeconds,omitempty"`
	VisibilityTimeoutSeconds *int `json:"visibilityTimeoutSeconds,omitempty"`
}

// Queue defaults the server applies.
const (
	DefaultRetentionSeconds         = 345600
	DefaultVisibilityTimeoutSeconds = 30
)

type queueRecord struct {
	Queue
	Owner string `json:"owner"`
}

func (s *Server) routeQueues(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/queues", s.v1(OpCreateQueue, s.createQueue))
	mux.HandleFunc("GET /v1/queues/{name}", s.v1(OpGetQueue, s.getQueue))
	mux.HandleFunc("PATCH /v1/queues/{name}", s.v1(OpUpdateQueue, s.updateQueue))
	mux.HandleFunc("DELETE /v1/queues/{name}", s.v1(OpDeleteQueue, s.deleteQueue))
}

// Queues returns every queue of every account, sorted by name.
func (s *Server) Queues() []Queue {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Queue, 0, len(s.queues))
	for _, q := range s.queues {
		out = append(out, q.Queue)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// GetQueue returns the named queue, if it exists.
func (s *Server) GetQueue(name string) (Queue, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := s.queues[name]
	if !ok {
		return Queue{}, false
	}
	return q.Queue, true
}

// ValidateQueueName checks a queue name: 1 to 80 characters of letters,
// digits, '-' and '_'.
func ValidateQueueName(name string) error {
	if len(name) < 1 || len(name) > 80 || strings.Trim(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != "" {
		return fmt.Errorf("queue name %q must be 1 to 80 letters, digits, '-' or '_'", name)
	}
	return nil
}

func validQueueAttrs(retention, visibility int) error {
	if retention != 0 && (retention < 60 || retention > 1209600) {
		return fmt.Errorf("retentionSeconds %d is outside 60..1209600", retention)
	}
	if visibility != 0 && (visibility < 0 || visibility > 43200) {
		return fmt.Errorf("visibilityTimeoutSeconds %d is outside 0..43200", visibility)
	}
	return nil
}

func (s *Server) createQueue(w http.ResponseWriter, r *http.Request, owner string, call *Call) {
	var req CreateQueueRequest
	if !decodeBody(w, r, &req) {
		return
	}
	call.Bucket = req.Name
	token := r.Header.Get("Idempotency-Key")
	if token == "" || len(token) > 128 {
		writeError(w, http.StatusBadRequest, CodeInvalidArgument, "an Idempotency-Key header of 1-128 characters is required")
		return
	}
	if err := ValidateQueueName(req.Name); err != nil {
		writeError(w, http.StatusBadRequest, CodeInvalidQueueName, err.Error())
		return
	}
	if err := validQueueAttrs(req.RetentionSeconds, req.VisibilityTimeoutSeconds); err != nil {
		writeError(w, http.StatusBadRequest, CodeInvalidArgument, err.Error())
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if q, ok := s.queues[req.Name]; ok {
		if q.Owner != owner || q.ClientToken != token {
			writeError(w, http.StatusConflict, CodeQueueExists, fmt.Sprintf("queue %q already exists and was not created with this request token", req.Name))
			return
		}
		writeJSON(w, http.StatusOK, q.Queue) // a replay
		return
	}
	q := &queueRecord{Owner: owner, Queue: Queue{
		Name: req.Name, FIFO: req.FIFO, RetentionSeconds: req.RetentionSeconds, VisibilityTimeoutSeconds: req.VisibilityTimeoutSeconds,
		ClientToken: token, URL: s.baseURL + "/q/" + req.Name, AccessToken: "QT" + randomHex(16),
	}}
	if q.RetentionSeconds == 0 {
		q.RetentionSeconds = DefaultRetentionSeconds
	}
	if q.VisibilityTimeoutSeconds == 0 {
		q.VisibilityTimeoutSeconds = DefaultVisibilityTimeoutSeconds
	}
	s.queues[req.Name] = q
	if err := s.persistLocked(); err != nil {
		delete(s.queues, req.Name)
		writeError(w, http.StatusInternalServerError, CodeInternalError, "could not persist the queue")
		return
	}
	writeJSON(w, http.StatusCreated, q.Queue)
}

func (s *Server) lookupQueueLocked(w http.ResponseWriter, r *http.Request, owner string) *queueRecord {
	return lookupOwned(w, r, s.queues, owner, "queue", CodeNoSuchQueue)
}

func (s *Server) getQueue(w http.ResponseWriter, r *http.Request, owner string, _ *Call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q := s.lookupQueueLocked(w, r, owner); q != nil {
		writeJSON(w, http.StatusOK, q.Queue)
	}
}

func (s *Server) updateQueue(w http.ResponseWriter, r *http.Request, owner string, _ *Call) {
	var req UpdateQueueRequest
	if !decodeBody(w, r, &req) {
		return
	}
	var ret, vis int
	if req.RetentionSeconds != nil {
		ret = *req.RetentionSeconds
	}
	if req.VisibilityTimeoutSeconds != nil {
		vis = *req.VisibilityTimeoutSeconds
	}
	if err := validQueueAttrs(ret, vis); err != nil {
		writeError(w, http.StatusBadRequest, CodeInvalidArgument, err.Error())
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.lookupQueueLocked(w, r, owner)
	if q == nil {
		return
	}
	before := *q
	if req.RetentionSeconds != nil {
		q.RetentionSeconds = *req.RetentionSeconds
	}
	if req.VisibilityTimeoutSeconds != nil {
		q.VisibilityTimeoutSeconds = *req.VisibilityTimeoutSeconds
	}
	if err := s.persistLocked(); err != nil {
		*q = before
		writeError(w, http.StatusInternalServerError, CodeInternalError, "could not persist the queue")
		return
	}
	writeJSON(w, http.StatusOK, q.Queue)
}

func (s *Server) deleteQueue(w http.ResponseWriter, r *http.Request, owner string, _ *Call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.lookupQueueLocked(w, r, owner)
	if q == nil {
		return
	}
	delete(s.queues, q.Name)
	if err := s.persistLocked(); err != nil {
		s.queues[q.Name] = q
		writeError(w, http.StatusInternalServerError, CodeInternalError, "could not persist the deletion")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// IsQueueNotFound reports whether err says the queue does not exist.
func IsQueueNotFound(err error) bool { return CodeOf(err) == CodeNoSuchQueue }

// CreateQueue creates a queue; token is the request token (Idempotency-Key).
func (c *Client) CreateQueue(ctx context.Context, req CreateQueueRequest, token string) (*Queue, error) {
	var q Queue
	if err := c.do(ctx, OpCreateQueue, req.Name, http.MethodPost, "/v1/queues", token, req, &q); err != nil {
		return nil, err
	}
	return &q, nil
}

// GetQueue returns the named queue; a missing one is an error for which
// [IsQueueNotFound] is true.
func (c *Client) GetQueue(ctx context.Context, name string) (*Queue, error) {
	var q Queue
	if err := c.do(ctx, OpGetQueue, name, http.MethodGet, "/v1/queues/"+url.PathEscape(name), "", nil, &q); err != nil {
		return nil, err
	}
	return &q, nil
}

// UpdateQueue changes the attributes set in req.
func (c *Client) UpdateQueue(ctx context.Context, name string, req UpdateQueueRequest) (*Queue, error) {
	var q Queue
	if err := c.do(ctx, OpUpdateQueue, name, http.MethodPatch, "/v1/queues/"+url.PathEscape(name), "", req, &q); err != nil {
		return nil, err
	}
	return &q, nil
}

// DeleteQueue deletes the queue at once.
func (c *Client) DeleteQueue(ctx context.Context, name string) error {
	return c.do(ctx, OpDeleteQueue, name, http.MethodDelete, "/v1/queues/"+url.PathEscape(name), "", nil, nil)
}
