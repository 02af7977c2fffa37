package outcome_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/opkit/opkit/outcome"
)

var gr = schema.GroupResource{Group: "apps", Resource: "deployments"}

func tooManyRequests(retryAfter int) error {
	return apierrors.NewTooManyRequests("slow down", retryAfter)
}

func statusErr(code int32, reason metav1.StatusReason) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: code, Reason: reason, Message: "boom"}}
}

func TestClassify(t *testing.T) {
	base := errors.New("base")
	tests := []struct {
		name   string
		err    error
		class  outcome.Class
		reason string
		after  time.Duration
	}{
		{"nil is success", nil, outcome.ClassSuccess, "", 0},
		{"api conflict", apierrors.NewConflict(gr, "web", base), outcome.ClassConflict, "Conflict", outcome.ConflictRequeueAfter},
		{"wrapped api conflict", fmt.Errorf("update ns/web: %w", apierrors.NewConflict(gr, "web", base)), outcome.ClassConflict, "Conflict", outcome.ConflictRequeueAfter},
		{"already exists is not a conflict", apierrors.NewAlreadyExists(gr, "web"), outcome.ClassTransient, "AlreadyExists", 0},
		{"429 honours Retry-After", tooManyRequests(7), outcome.ClassTransient, "TooManyRequests", 7 * time.Second},
		{"429 without Retry-After", tooManyRequests(0), outcome.ClassTransient, "TooManyRequests", 0},
		{"500 internal", apierrors.NewInternalError(base), outcome.ClassTransient, "InternalError", 0},
		{"503 unavailable", apierrors.NewServiceUnavailable("down"), outcome.ClassTransient, "ServiceUnavailable", 0},
		{"server timeout suggests delay", apierrors.NewServerTimeout(gr, "get", 3), outcome.ClassTransient, "ServerTimeout", 3 * time.Second},
		{"gateway timeout", apierrors.NewTimeoutError("slow", 0), outcome.ClassTransient, "Timeout", 0},
		{"502 without reason", statusErr(502, ""), outcome.ClassTransient, "APIError", 0},
		{"422 invalid", apierrors.NewInvalid(schema.GroupKind{Kind: "Widget"}, "w", field.ErrorList{field.Invalid(field.NewPath("spec", "size"), 11, "too big")}), outcome.ClassTerminal, "Invalid", 0},
		{"422 by code only", statusErr(422, ""), outcome.ClassTerminal, "Invalid", 0},
		{"400 bad request", apierrors.NewBadRequest("nope"), outcome.ClassTerminal, "BadRequest", 0},
		{"403 forbidden is transient", apierrors.NewForbidden(gr, "web", base), outcome.ClassTransient, "Forbidden", 0},
		{"404 not found is transient", apierrors.NewNotFound(gr, "web"), outcome.ClassTransient, "NotFound", 0},
		{"controller-runtime terminal", reconcile.TerminalError(base), outcome.ClassTerminal, "TerminalError", 0},
		{"wrapped controller-runtime terminal", fmt.Errorf("x: %w", reconcile.TerminalError(base)), outcome.ClassTerminal, "TerminalError", 0},
		{"terminal wrapping a conflict stays terminal", reconcile.TerminalError(apierrors.NewConflict(gr, "web", base)), outcome.ClassTerminal, "Conflict", 0},
		{"deadline", fmt.Errorf("get: %w", context.DeadlineExceeded), outcome.ClassTransient, "Timeout", 0},
		{"canceled", context.Canceled, outcome.ClassTransient, "Canceled", 0},
		{"net.OpError", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("refused")}, outcome.ClassTransient, "NetworkError", 0},
		{"io.EOF", fmt.Errorf("read: %w", io.EOF), outcome.ClassTransient, "NetworkError", 0},
		{"unexpected EOF", io.ErrUnexpectedEOF, outcome.ClassTransient, "NetworkError", 0},
		{"connection reset", fmt.Errorf("read: %w", syscall.ECONNRESET), outcome.ClassTransient, "NetworkError", 0},
		{"connection refused", syscall.ECONNREFUSED, outcome.ClassTransient, "NetworkError", 0},
		{"unknown error retries", base, outcome.ClassTransient, "TransientError", 0},
		{"explicit terminal", outcome.Terminal("InvalidSpec", base), outcome.ClassTerminal, "InvalidSpec", 0},
		{"explicit terminal wrapped", fmt.Errorf("ns/web: %w", outcome.Terminal("InvalidSpec", base)), outcome.ClassTerminal, "InvalidSpec", 0},
		{"explicit transient beats automatic terminal", outcome.Transient("Flaky", apierrors.NewBadRequest("x")), outcome.ClassTransient, "Flaky", 0},
		{"explicit transient beats automatic conflict", outcome.Transient("Busy", apierrors.NewConflict(gr, "web", base)), outcome.ClassTransient, "Busy", 0},
		{"explicit terminal beats automatic conflict", outcome.Terminal("Immutable", apierrors.NewConflict(gr, "web", base)), outcome.ClassTerminal, "Immutable", 0},
		{"outermost explicit wrapper wins", outcome.Transient("Outer", outcome.DependencyNotReady("Inner", "m", time.Second)), outcome.ClassTransient, "Outer", 0},
		{"controller-runtime terminal overrides inner transient", reconcile.TerminalError(outcome.Transient("Flaky", base)), outcome.ClassTerminal, "Flaky", 0},
		{"dependency", outcome.DependencyNotReady("DatabaseNotReady", "waiting", 15*time.Second), outcome.ClassDependencyNotReady, "DatabaseNotReady", 15 * time.Second},
		{"dependency default wait", outcome.DependencyNotReady("", "waiting", 0), outcome.ClassDependencyNotReady, "DependencyNotReady", outcome.DefaultDependencyWait},
		{"explicit conflict", outcome.Conflict(base), outcome.ClassConflict, "Conflict", outcome.ConflictRequeueAfter},
		{"reason normalised", outcome.Terminal("image pull failed", base), outcome.ClassTerminal, "ImagePullFailed", 0},
		{"empty reason defaults", outcome.Transient("", base), outcome.ClassTransient, "TransientError", 0},
		{"joined errors: first match", errors.Join(base, outcome.Terminal("Bad", base)), outcome.ClassTerminal, "Bad", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := outcome.Classify(tt.err)
			if c.Class != tt.class || c.Reason != tt.reason || c.RequeueAfter != tt.after {
				t.Fatalf("Classify(%v) = %+v; want class %v reason %q after %v", tt.err, c, tt.class, tt.reason, tt.after)
			}
			if tt.err != nil && c.Message == "" {
				t.Errorf("empty message for %v", tt.err)
			}
			if tt.err != nil && !reasonRE.MatchString(c.Reason) {
				t.Errorf("reason %q is not a valid condition reason", c.Reason)
			}
		})
	}
}

func TestMessages(t *testing.T) {
	base := errors.New("replicas must be >= 0")
	if got := outcome.Classify(outcome.Terminal("InvalidSpec", base)).Message; got != "replicas must be >= 0" {
		t.Errorf("terminal message %q", got)
	}
	if got := outcome.Classify(outcome.DependencyNotReady("DB", "waiting for db", 0)).Message; got != "waiting for db" {
		t.Errorf("dependency message %q", got)
	}
	if got := outcome.Classify(outcome.Terminal("InvalidSpec", nil)).Message; got != "InvalidSpec" {
		t.Errorf("nil-cause message %q", got)
	}
	if outcome.Terminal("X", nil) == nil || outcome.Transient("X", nil) == nil || outcome.Conflict(nil) == nil {
		t.Error("constructors must never return nil")
	}
	err := outcome.Terminal("InvalidSpec", base)
	if !errors.Is(err, base) {
		t.Error("Terminal must wrap its cause")
	}
	if got, want := err.Error(), "terminal error: InvalidSpec: replicas must be >= 0"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestTerminalIsControllerRuntimeTerminal(t *testing.T) {
	err := fmt.Errorf("ns/web: %w", outcome.Terminal("InvalidSpec", errors.New("bad")))
	if !errors.Is(err, reconcile.TerminalError(nil)) {
		t.Fatal("controller-runtime does not recognise outcome.Terminal as terminal")
	}
	for _, e := range []error{outcome.Transient("X", errors.New("x")), outcome.DependencyNotReady("X", "x", 0), outcome.Conflict(errors.New("x"))} {
		if errors.Is(e, reconcile.TerminalError(nil)) {
			t.Errorf("%v must not be terminal for controller-runtime", e)
		}
	}
}

func TestResult(t *testing.T) {
	base := errors.New("base")
	invalid := apierrors.NewBadRequest("bad")
	tests := []struct {
		name         string
		err          error
		result       reconcile.Result
		wantErr      bool
		wantTerminal bool
	}{
		{"success", nil, reconcile.Result{}, false, false},
		{"conflict requeues quietly", apierrors.NewConflict(gr, "web", base), reconcile.Result{RequeueAfter: outcome.ConflictRequeueAfter}, false, false},
		{"transient returns error for backoff", apierrors.NewInternalError(base), reconcile.Result{}, true, false},
		{"unknown returns error for backoff", base, reconcile.Result{}, true, false},
		{"429 waits for Retry-After", tooManyRequests(5), reconcile.Result{RequeueAfter: 5 * time.Second}, false, false},
		{"dependency waits fixed", outcome.DependencyNotReady("DB", "m", 30*time.Second), reconcile.Result{RequeueAfter: 30 * time.Second}, false, false},
		{"explicit terminal", outcome.Terminal("Bad", base), reconcile.Result{}, true, true},
		{"automatic terminal gets wrapped", invalid, reconcile.Result{}, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := outcome.Result(tt.err)
			if res != tt.result {
				t.Errorf("result %+v, want %+v", res, tt.result)
			}
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil && errors.Is(err, reconcile.TerminalError(nil)) != tt.wantTerminal {
				t.Errorf("terminal = %v, want %v", !tt.wantTerminal, tt.wantTerminal)
			}
			if err != nil && !errors.Is(err, tt.err) {
				t.Errorf("returned error %v does not wrap %v", err, tt.err)
			}
		})
	}
	// An explicit Terminal is returned as is, not double-wrapped.
	term := outcome.Terminal("Bad", base)
	if _, err := outcome.Result(term); err != term { //nolint:errorlint // identity is the point
		t.Errorf("Terminal error was re-wrapped: %v", err)
	}
}

var reasonRE = regexp.MustCompile(`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`)

func TestSanitizeReason(t *testing.T) {
	tests := []struct{ in, want string }{
		{"InvalidSpec", "InvalidSpec"},
		{"invalidSpec", "InvalidSpec"},
		{"image pull failed", "ImagePullFailed"},
		{"db-not-ready", "DbNotReady"},
		{"42 things", "Things"},
		{"a:b,c_", "A:b,c_"},
		{"trailing,:", "Trailing"},
		{"", "Fallback"},
		{"!!!", "Fallback"},
		{"Ünïcode reason", "NCodeReason"},
	}
	for _, tt := range tests {
		if got := outcome.SanitizeReason(tt.in, "Fallback"); got != tt.want {
			t.Errorf("SanitizeReason(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func FuzzSanitizeReason(f *testing.F) {
	for _, s := range []string{"", "Ready", "image pull failed", "a:b,", "9lives", "x\x00y", "ÄÖÜ", "_:_"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := outcome.SanitizeReason(s, "Fallback")
		if !reasonRE.MatchString(got) || len(got) > 1024 {
			t.Fatalf("SanitizeReason(%q) = %q: invalid reason", s, got)
		}
		if again := outcome.SanitizeReason(got, "Other"); again != got {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, got, again)
		}
	})
}

func FuzzClassifyNeverPanics(f *testing.F) {
	f.Add("boom", int32(500), "InternalError", 0)
	f.Add("x", int32(429), "", 3)
	f.Add("y", int32(409), "Conflict", 0)
	f.Fuzz(func(t *testing.T, msg string, code int32, reason string, retry int) {
		st := &apierrors.StatusError{ErrStatus: metav1.Status{Code: code, Reason: metav1.StatusReason(reason), Message: msg,
			Details: &metav1.StatusDetails{RetryAfterSeconds: int32(retry % 1000)}}}
		for _, err := range []error{st, fmt.Errorf("%s: %w", msg, st), outcome.Transient(reason, st), reconcile.TerminalError(st)} {
			c := outcome.Classify(err)
			if !reasonRE.MatchString(c.Reason) {
				t.Fatalf("invalid reason %q for %v", c.Reason, err)
			}
			res, rerr := outcome.Result(err)
			switch c.Class {
			case outcome.ClassTerminal:
				if !errors.Is(rerr, reconcile.TerminalError(nil)) {
					t.Fatalf("terminal class but Result error %v", rerr)
				}
			case outcome.ClassConflict, outcome.ClassDependencyNotReady:
				if rerr != nil || res.RequeueAfter <= 0 {
					t.Fatalf("%v: Result = %+v, %v", c.Class, res, rerr)
				}
			case outcome.ClassTransient:
				if (rerr == nil) == (res.RequeueAfter == 0) {
					t.Fatalf("transient: exactly one of error and RequeueAfter expected, got %+v, %v", res, rerr)
				}
			default:
				t.Fatalf("non-nil error classified %v", c.Class)
			}
		}
	})
}

func TestClassString(t *testing.T) {
	want := map[outcome.Class]string{outcome.ClassSuccess: "Success", outcome.ClassConflict: "Conflict", outcome.ClassTransient: "Transient",
		outcome.ClassDependencyNotReady: "DependencyNotReady", outcome.ClassTerminal: "Terminal", outcome.Class(42): "Class(42)"}
	for c, s := range want {
		if c.String() != s {
			t.Errorf("%d.String() = %q, want %q", int(c), c.String(), s)
		}
	}
}

// TestEveryAPIStatusReasonHasAClass walks every metav1.StatusReason the API
// defines: the table in Classify's documentation is the code's table.
func TestEveryAPIStatusReasonHasAClass(t *testing.T) {
	want := map[metav1.StatusReason]outcome.Class{
		metav1.StatusReasonUnauthorized:          outcome.ClassTransient,
		metav1.StatusReasonForbidden:             outcome.ClassTransient,
		metav1.StatusReasonNotFound:              outcome.ClassTransient,
		metav1.StatusReasonAlreadyExists:         outcome.ClassTransient,
		metav1.StatusReasonConflict:              outcome.ClassConflict,
		metav1.StatusReasonGone:                  outcome.ClassTransient,
		metav1.StatusReasonInvalid:               outcome.ClassTerminal,
		metav1.StatusReasonServerTimeout:         outcome.ClassTransient,
		metav1.StatusReasonStoreReadError:        outcome.ClassTransient,
		metav1.StatusReasonTimeout:               outcome.ClassTransient,
		metav1.StatusReasonTooManyRequests:       outcome.ClassTransient,
		metav1.StatusReasonBadRequest:            outcome.ClassTerminal,
		metav1.StatusReasonMethodNotAllowed:      outcome.ClassTerminal,
		metav1.StatusReasonNotAcceptable:         outcome.ClassTerminal,
		metav1.StatusReasonRequestEntityTooLarge: outcome.ClassTerminal,
		metav1.StatusReasonUnsupportedMediaType:  outcome.ClassTerminal,
		metav1.StatusReasonInternalError:         outcome.ClassTransient,
		metav1.StatusReasonExpired:               outcome.ClassTransient,
		metav1.StatusReasonServiceUnavailable:    outcome.ClassTransient,
	}
	for reason, class := range want {
		err := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Reason: reason, Message: "m",
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: "FieldValueInvalid", Field: "spec.x"}}}}}
		c := outcome.Classify(fmt.Errorf("wrapped: %w", err))
		if c.Class != class || c.Reason != string(reason) {
			t.Errorf("%s: %s/%s, want %s/%s", reason, c.Class, c.Reason, class, reason)
		}
		if (c.Class == outcome.ClassConflict) != (c.RequeueAfter == outcome.ConflictRequeueAfter) {
			t.Errorf("%s: RequeueAfter %s", reason, c.RequeueAfter)
		}
	}
	for code, want := range map[int32]outcome.Classification{
		422: {Class: outcome.ClassTerminal, Reason: "Invalid"},
		405: {Class: outcome.ClassTerminal, Reason: "MethodNotAllowed"},
		404: {Class: outcome.ClassTransient, Reason: "NotFound"},
		408: {Class: outcome.ClassTransient, Reason: outcome.ReasonAPIError},
		502: {Class: outcome.ClassTransient, Reason: outcome.ReasonAPIError},
	} {
		err := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: code, Message: "m"}}
		if c := outcome.Classify(err); c.Class != want.Class || c.Reason != want.Reason {
			t.Errorf("no reason, code %d: %s/%s, want %s/%s", code, c.Class, c.Reason, want.Class, want.Reason)
		}
	}
}

// TestJSONPatchPreconditionIsAConflict: the API server answers a JSON patch
// whose "test" no longer holds with the status NewGenericServerResponse(422)
// builds (no causes); that is a lost race, not an invalid object. A 422 with
// field causes stays Terminal.
func TestJSONPatchPreconditionIsAConflict(t *testing.T) {
	lost := apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", "testing value /metadata/uid failed: test failed", 0, false)
	if c := outcome.Classify(lost); c.Class != outcome.ClassConflict || c.Reason != outcome.ReasonConflict {
		t.Fatalf("failed JSON-patch test: %s/%s, want Conflict", c.Class, c.Reason)
	}
	invalid := apierrors.NewInvalid(schema.GroupKind{Kind: "Widget"}, "w", field.ErrorList{field.Invalid(field.NewPath("spec", "size"), -1, "must be >= 0")})
	if c := outcome.Classify(invalid); c.Class != outcome.ClassTerminal || c.Reason != outcome.ReasonInvalid {
		t.Fatalf("invalid object: %s/%s, want Terminal/Invalid", c.Class, c.Reason)
	}
}

// TestRequeueAfterIsSuccessWithAJitteredWait: RequeueAfter classifies as
// Success (through wrapping), and Result returns no error and a wait in
// [d, d·(1+RequeueJitter)); a non-positive wait is plain success.
func TestRequeueAfterIsSuccessWithAJitteredWait(t *testing.T) {
	d := 10 * time.Second
	err := fmt.Errorf("schedule: %w", outcome.RequeueAfter(d))
	c := outcome.Classify(err)
	if c.Class != outcome.ClassSuccess || c.Reason != outcome.ReasonRequeue || c.RequeueAfter != d {
		t.Fatalf("Classify = %+v, want Success/%s after %v", c, outcome.ReasonRequeue, d)
	}
	seen := map[time.Duration]bool{}
	for range 50 {
		res, rerr := outcome.Result(err)
		if rerr != nil {
			t.Fatalf("Result returned error %v", rerr)
		}
		if res.RequeueAfter < d || res.RequeueAfter >= d+time.Duration(float64(d)*outcome.RequeueJitter) {
			t.Fatalf("RequeueAfter %v outside [%v, %v)", res.RequeueAfter, d, d+time.Duration(float64(d)*outcome.RequeueJitter))
		}
		seen[res.RequeueAfter] = true
	}
	if len(seen) < 2 {
		t.Fatalf("no jitter: 50 results gave %v", seen)
	}
	if res, rerr := outcome.Result(outcome.RequeueAfter(-time.Second)); rerr != nil || res.RequeueAfter != 0 {
		t.Fatalf("non-positive wait: %+v, %v; want plain success", res, rerr)
	}
}
