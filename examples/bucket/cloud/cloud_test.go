package cloud

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const (
	testKey    = "AKTEST"
	testSecret = "s3cr3t-value-never-logged"
)

func start(t *testing.T, opts ...Option) (*Server, *Client) {
	t.Helper()
	s, err := NewServer(append([]Option{WithAccount(testKey, testSecret)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	base, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	c, err := NewClient(base, Credentials{AccessKeyID: testKey, SecretAccessKey: testSecret}, WithTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

func codeOf(t *testing.T, err error, want string) Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Code != want {
		t.Fatalf("want error code %s, got %v", want, err)
	}
	if strings.Contains(err.Error(), testSecret) {
		t.Fatalf("error text leaks the secret key: %v", err)
	}
	return *e
}

func TestCreateIsIdempotentByToken(t *testing.T) {
	s, c := start(t)
	ctx := t.Context()
	req := CreateRequest{Name: "photos", Region: "eu-west-1", Versioning: true}
	first, err := c.Create(ctx, req, "token-1")
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Create(ctx, req, "token-1")
	if err != nil {
		t.Fatalf("replay with the same token: %v", err)
	}
	if again.SecretAccessKey != first.SecretAccessKey || again.ClientToken != "token-1" || !again.Versioning {
		t.Fatalf("replay returned another bucket: %+v vs %+v", again, first)
	}
	_, err = c.Create(ctx, req, "token-2")
	codeOf(t, err, CodeBucketAlreadyExists)
	_, err = c.Create(ctx, CreateRequest{Name: "other", Region: "eu-west-1"}, "token-1")
	codeOf(t, err, CodeIdempotentParameterMismatch)
	if n := len(s.Buckets()); n != 1 {
		t.Fatalf("%d buckets, want 1", n)
	}
}

func TestValidationQuotaAndAuth(t *testing.T) {
	_, c := start(t, WithMaxBuckets(1))
	ctx := t.Context()
	for _, name := range []string{"ab", "Upper", "-dash", "a..b", "192.168.1.1", "xn--punycode", "x-alias"} {
		_, err := c.Create(ctx, CreateRequest{Name: name, Region: "eu-west-1"}, "t-"+name)
		if e := codeOf(t, err, CodeInvalidBucketName); e.StatusCode != http.StatusBadRequest {
			t.Fatalf("%s: status %d", name, e.StatusCode)
		}
	}
	if _, err := c.Create(ctx, CreateRequest{Name: "one", Region: "eu-west-1"}, "t1"); err != nil {
		t.Fatal(err)
	}
	_, err := c.Create(ctx, CreateRequest{Name: "two", Region: "eu-west-1"}, "t2")
	if e := codeOf(t, err, CodeQuotaExceeded); e.StatusCode != http.StatusForbidden {
		t.Fatalf("quota: status %d", e.StatusCode)
	}
	bad, err := NewClient(c.base, Credentials{AccessKeyID: testKey, SecretAccessKey: "wrong"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = bad.Get(ctx, "one")
	codeOf(t, err, CodeInvalidAccessKey)
}

func TestRateLimitSendsRetryAfterAndTheClientWaits(t *testing.T) {
	s, c := start(t, WithRateLimit(0.5, 2))
	ctx := t.Context()
	for range 2 {
		if _, err := c.List(ctx); err != nil {
			t.Fatal(err)
		}
	}
	_, err := c.List(ctx)
	e := codeOf(t, err, CodeSlowDown)
	if e.StatusCode != http.StatusTooManyRequests || e.RetryAfter < time.Second || e.Local {
		t.Fatalf("want a server 429 with Retry-After, got %+v", e)
	}
	sent := s.CallCount("")
	_, err = c.List(ctx)
	if e := codeOf(t, err, CodeSlowDown); !e.Local || e.RetryAfter <= 0 {
		t.Fatalf("want a local refusal while Retry-After runs, got %+v", e)
	}
	if s.CallCount("") != sent {
		t.Fatal("the client sent a call before Retry-After passed")
	}
}

func TestStatePersistsAcrossRestarts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	s, c := start(t, WithStateFile(path))
	created, err := c.Create(t.Context(), CreateRequest{Name: "kept", Region: "us-east-1", QuotaClass: QuotaLarge}, "tok")
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	s2, err := NewServer(WithStateFile(path))
	if err != nil {
		t.Fatal(err)
	}
	b, ok := s2.Get("kept")
	if !ok || b.SecretAccessKey != created.SecretAccessKey || b.QuotaClass != QuotaLarge || b.ClientToken != "tok" {
		t.Fatalf("bucket not restored: %+v %v", b, ok)
	}
}

func TestAsyncDeleteAndFaults(t *testing.T) {
	s, c := start(t, WithDeleteDelay(300*time.Millisecond))
	ctx := t.Context()
	if _, err := c.Create(ctx, CreateRequest{Name: "tmp", Region: "eu-west-1"}, "tok"); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, "tmp"); err != nil {
		t.Fatal(err)
	}
	b, err := c.Get(ctx, "tmp")
	if err != nil || b.State != StateDeleting {
		t.Fatalf("right after delete: %+v %v", b, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := c.Get(ctx, "tmp")
		if IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bucket not gone: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Faults through the admin endpoint, as the README shows with curl.
	resp, err := http.Post(c.base+"/admin/faults", "application/json", bytes.NewBufferString(`{"failNext": 2}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for range 2 {
		_, err := c.List(ctx)
		codeOf(t, err, CodeServiceUnavailable)
	}
	if _, err := c.List(ctx); err != nil {
		t.Fatal(err)
	}

	// A slow call times the client out but still takes effect.
	s.SlowNext(1, 700*time.Millisecond)
	short, _ := NewClient(c.base, c.creds, WithTimeout(200*time.Millisecond))
	if _, err := short.Create(ctx, CreateRequest{Name: "late", Region: "eu-west-1"}, "late-tok"); err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want a client timeout, got %v", err)
	}
	deadline = time.Now().Add(5 * time.Second)
	for {
		if _, ok := s.Get("late"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the timed-out create never took effect")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := c.Create(ctx, CreateRequest{Name: "late", Region: "eu-west-1"}, "late-tok"); err != nil {
		t.Fatalf("retry after a timeout must find the bucket: %v", err)
	}
}
