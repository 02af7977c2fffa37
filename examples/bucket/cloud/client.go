package cloud

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Credentials authenticate a [Client] as one account.
type Credentials struct {
	AccessKeyID     string
	SecretAccessKey string
}

// Error is a failed call: an error answer of the server, or a call the
// client refused to send because the server's Retry-After has not passed
// (Local). Its text never contains credentials.
type Error struct {
	// Op is the operation, one of the Op constants.
	Op string
	// Bucket is the bucket the call was about, if any.
	Bucket string
	// StatusCode is the HTTP status (429 for a Local refusal).
	StatusCode int
	// Code is the server's error code, e.g. CodeQuotaExceeded.
	Code    string
	Message string
	// RetryAfter is the server's Retry-After (or what is left of it, for a
	// Local refusal); zero when the server gave none.
	RetryAfter time.Duration
	// Local is true when no request was sent: an earlier 429's Retry-After
	// for these credentials has not passed yet.
	Local bool
}

func (e *Error) Error() string {
	target := e.Op
	if e.Bucket != "" {
		target += " " + e.Bucket
	}
	if e.Local {
		return fmt.Sprintf("cloud %s: not sent: %s", target, e.Message)
	}
	return fmt.Sprintf("cloud %s: %d %s: %s", target, e.StatusCode, e.Code, e.Message)
}

// CodeOf returns the server's error code of err ("" if err is not an [*Error]).
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// IsNotFound reports whether err says the bucket does not exist.
func IsNotFound(err error) bool { return CodeOf(err) == CodeNoSuchBucket }

// RetryGate remembers, per endpoint and access key, until when the server
// asked a client to wait (Retry-After). Clients sharing a gate send nothing
// for those credentials until then: the limit is the client's, not one
// call's, so every caller must honour it. The zero value is not usable; use
// [NewRetryGate]. It is safe for concurrent use.
type RetryGate struct {
	mu    sync.Mutex
	until map[string]time.Time
}

// NewRetryGate returns an open gate.
func NewRetryGate() *RetryGate { return &RetryGate{until: map[string]time.Time{}} }

// wait returns how long callers of key must still wait.
func (g *RetryGate) wait(key string, now time.Time) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	until, ok := g.until[key]
	if !ok {
		return 0
	}
	if !now.Before(until) {
		delete(g.until, key)
		return 0
	}
	return until.Sub(now)
}

// close shuts the gate for key until now+d, never shortening an earlier wait.
func (g *RetryGate) close(key string, now time.Time, d time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if until := now.Add(d); until.After(g.until[key]) {
		g.until[key] = until
	}
}

// ClientOption configures [NewClient].
type ClientOption func(*Client)

// WithHTTPClient sets the HTTP client (default: a client with a 10s timeout).
func WithHTTPClient(hc *http.Client) ClientOption { return func(c *Client) { c.hc = hc } }

// WithTimeout bounds each call, on top of the context's deadline.
func WithTimeout(d time.Duration) ClientOption { return func(c *Client) { c.timeout = d } }

// WithRetryGate shares a [RetryGate] between clients.
func WithRetryGate(g *RetryGate) ClientOption { return func(c *Client) { c.gate = g } }

// Client calls the API as one account.
type Client struct {
	base    string
	creds   Credentials
	hc      *http.Client
	timeout time.Duration
	gate    *RetryGate
}

// NewClient returns a client of the API at endpoint (e.g. "http://127.0.0.1:9000").
func NewClient(endpoint string, creds Credentials, opts ...ClientOption) (*Client, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("cloud: endpoint %q is not an http(s) URL", endpoint)
	}
	if creds.AccessKeyID == "" || creds.SecretAccessKey == "" {
		return nil, errors.New("cloud: credentials need an access key ID and a secret access key")
	}
	c := &Client{base: strings.TrimSuffix(endpoint, "/"), creds: creds, hc: &http.Client{Timeout: 10 * time.Second}}
	for _, o := range opts {
		o(c)
	}
	if c.gate == nil {
		c.gate = NewRetryGate()
	}
	return c, nil
}

// Create creates a bucket. token is the request token (Idempotency-Key):
// retrying with the same token returns the bucket the first call created,
// whether or not its answer arrived.
func (c *Client) Create(ctx context.Context, req CreateRequest, token string) (*Bucket, error) {
	var b Bucket
	if err := c.do(ctx, OpCreate, req.Name, http.MethodPost, "/v1/buckets", token, req, &b); err != nil {
		return nil, err
	}
	return &b, nil
}

// Get returns the named bucket; a missing one is an error for which
// [IsNotFound] is true.
func (c *Client) Get(ctx context.Context, name string) (*Bucket, error) {
	var b Bucket
	if err := c.do(ctx, OpGet, name, http.MethodGet, "/v1/buckets/"+url.PathEscape(name), "", nil, &b); err != nil {
		return nil, err
	}
	return &b, nil
}

// List returns the account's buckets.
func (c *Client) List(ctx context.Context) ([]Bucket, error) {
	var out []Bucket
	if err := c.do(ctx, OpList, "", http.MethodGet, "/v1/buckets", "", nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// Update changes the fields set in req.
func (c *Client) Update(ctx context.Context, name string, req UpdateRequest) (*Bucket, error) {
	var b Bucket
	if err := c.do(ctx, OpUpdate, name, http.MethodPatch, "/v1/buckets/"+url.PathEscape(name), "", req, &b); err != nil {
		return nil, err
	}
	return &b, nil
}

// Delete starts deleting the bucket; it is gone once [Client.Get] says
// [IsNotFound]. Deleting a bucket that is already being deleted is no error.
func (c *Client) Delete(ctx context.Context, name string) error {
	return c.do(ctx, OpDelete, name, http.MethodDelete, "/v1/buckets/"+url.PathEscape(name), "", nil, nil)
}

func (c *Client) do(ctx context.Context, op, bucket, method, path, token string, in, out any) error {
	gateKey := c.base + "|" + c.creds.AccessKeyID
	if wait := c.gate.wait(gateKey, time.Now()); wait > 0 {
		return &Error{Op: op, Bucket: bucket, StatusCode: http.StatusTooManyRequests, Code: CodeSlowDown,
			Message: "waiting for the server's Retry-After", RetryAfter: wait, Local: true}
	}
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("cloud %s: %w", op, err)
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return fmt.Errorf("cloud %s: %w", op, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.creds.AccessKeyID+":"+c.creds.SecretAccessKey)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Idempotency-Key", token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		// *url.Error names the URL (no credentials: they travel in a header).
		return fmt.Errorf("cloud %s %s: %w", op, bucket, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("cloud %s %s: read answer: %w", op, bucket, err)
	}
	if resp.StatusCode >= 300 {
		e := &Error{Op: op, Bucket: bucket, StatusCode: resp.StatusCode}
		var eb errorBody
		if json.Unmarshal(data, &eb) == nil && eb.Code != "" {
			e.Code, e.Message = eb.Code, eb.Message
		} else {
			e.Code, e.Message = http.StatusText(resp.StatusCode), "no error body"
		}
		if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
			e.RetryAfter = time.Duration(secs) * time.Second
		}
		if resp.StatusCode == http.StatusTooManyRequests {
			c.gate.close(gateKey, time.Now(), max(e.RetryAfter, time.Second))
		}
		return e
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("cloud %s %s: decode answer: %w", op, bucket, err)
	}
	return nil
}
