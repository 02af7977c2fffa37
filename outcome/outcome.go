package outcome

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Class is what kind of outcome a reconcile had. The zero value is ClassSuccess.
type Class int

const (
	// ClassSuccess means the reconcile finished; nothing is retried until an event arrives.
	ClassSuccess Class = iota
	// ClassConflict means an optimistic-concurrency conflict (HTTP 409 Conflict); the
	// object is reconciled again shortly from fresh data. Not an error to report.
	ClassConflict
	// ClassTransient means a failure that may go away on its own; retried with the
	// workqueue's exponential backoff (or after the server's Retry-After).
	ClassTransient
	// ClassDependencyNotReady means something the object needs does not exist or is not
	// ready yet; re-checked after a fixed wait, without growing backoff.
	ClassDependencyNotReady
	// ClassTerminal means retrying cannot help until the object's spec changes.
	ClassTerminal
)

// String returns the class name, e.g. "DependencyNotReady".
func (c Class) String() string {
	switch c {
	case ClassSuccess:
		return "Success"
	case ClassConflict:
		return "Conflict"
	case ClassTransient:
		return "Transient"
	case ClassDependencyNotReady:
		return "DependencyNotReady"
	case ClassTerminal:
		return "Terminal"
	}
	return "Class(" + strconv.Itoa(int(c)) + ")"
}

// Reasons that [Classify] assigns when the error does not carry one. Each is
// valid as a metav1.Condition reason.
const (
	ReasonConflict           = "Conflict"
	ReasonTooManyRequests    = "TooManyRequests"
	ReasonAPIError           = "APIError"
	ReasonInvalid            = "Invalid"
	ReasonBadRequest         = "BadRequest"
	ReasonForbidden          = "Forbidden"
	ReasonNotFound           = "NotFound"
	ReasonNetworkError       = "NetworkError"
	ReasonTimeout            = "Timeout"
	ReasonCanceled           = "Canceled"
	ReasonTerminalError      = "TerminalError"
	ReasonTransientError     = "TransientError"
	ReasonDependencyNotReady = "DependencyNotReady"
)

// ConflictRequeueAfter is how long [Result] waits before reconciling an object
// again after a Conflict. It is short, so the retry is effectively immediate,
// but not zero: the conflict means the informer cache is behind the server,
// and re-reading the cache at once would very likely conflict again.
const ConflictRequeueAfter = 100 * time.Millisecond

// DefaultDependencyWait is the wait [DependencyNotReady] uses when given a
// non-positive duration.
const DefaultDependencyWait = 10 * time.Second

// Classification is what [Classify] concludes about an error.
type Classification struct {
	// Class of the error; Success for nil.
	Class Class
	// Reason is a CamelCase string valid as a metav1.Condition reason; empty
	// only for Success (ReasonRequeue for [RequeueAfter]).
	Reason string
	// Message is human-readable detail, usually the error text; empty only for Success.
	Message string
	// RequeueAfter is the wait before the next attempt that [Result] uses:
	// ConflictRequeueAfter for Conflict, the caller's wait for
	// DependencyNotReady, the server's Retry-After for a Transient API error
	// that carried one, and zero otherwise (zero means exponential backoff for
	// Transient and no retry for Terminal).
	RequeueAfter time.Duration
}

// classified is the error the constructors return. It is unexported so
// [Classify] is the one way to read a class; errors.As still finds it through
// any wrapping.
type classified struct {
	class   Class
	reason  string
	message string
	after   time.Duration
	err     error
}

func (e *classified) Error() string {
	if e.err != nil {
		return e.reason + ": " + e.err.Error()
	}
	if e.message != "" {
		return e.reason + ": " + e.message
	}
	return e.reason
}

func (e *classified) Unwrap() error { return e.err }

// Terminal marks err as permanent: retrying cannot help until the object's
// spec changes (for example an invalid spec). The result wraps
// reconcile.TerminalError, so controller-runtime does not requeue it either.
// reason is normalised with [SanitizeReason] (default "TerminalError"); the
// message is err's text. A nil err gives an error whose message is the reason.
func Terminal(reason string, err error) error {
	e := &classified{class: ClassTerminal, reason: SanitizeReason(reason, ReasonTerminalError), err: err}
	e.message = messageOf(e)
	return reconcile.TerminalError(e)
}

// Transient marks err as temporary: it is retried with exponential backoff,
// whatever automatic classification would have said (for example to retry an
// error that would otherwise be Terminal). reason is normalised with
// [SanitizeReason] (default "TransientError").
func Transient(reason string, err error) error {
	e := &classified{class: ClassTransient, reason: SanitizeReason(reason, ReasonTransientError), err: err}
	e.message = messageOf(e)
	return e
}

// DependencyNotReady says the reconcile cannot finish until something else is
// ready; it is checked again after the fixed wait after (DefaultDependencyWait
// when after <= 0), with no growing backoff and no error logged. reason is
// normalised with [SanitizeReason] (default "DependencyNotReady").
func DependencyNotReady(reason, message string, after time.Duration) error {
	if after <= 0 {
		after = DefaultDependencyWait
	}
	return &classified{
		class: ClassDependencyNotReady, reason: SanitizeReason(reason, ReasonDependencyNotReady),
		message: message, after: after,
	}
}

// ReasonRequeue is the reason [Classify] reports for [RequeueAfter].
const ReasonRequeue = "Requeue"

// RequeueJitter is the fraction of the wait [Result] adds at random to a
// [RequeueAfter] wait (0.1: a wait d becomes one in [d, 1.1·d)), so objects
// created together do not come back together forever.
const RequeueJitter = 0.1

// RequeueAfter says the reconcile succeeded and the object should be looked
// at again after about after (a schedule, a poll of something that sends no
// events). It is not a failure: [Classify] calls it Success (reason
// [ReasonRequeue], RequeueAfter = after), so conditions.ApplyOutcome treats
// it exactly like nil — Reconciling and Stalled are removed, Ready is left to
// the caller — and [Result] returns (Result{RequeueAfter: after plus up to
// RequeueJitter of it}, nil). A non-positive after is plain success. It is an
// error value only so that any step that returns an error can say it; wrap
// it with fmt.Errorf("%w") freely.
func RequeueAfter(after time.Duration) error {
	return &classified{class: ClassSuccess, reason: ReasonRequeue, message: "requeue after " + after.String(), after: max(after, 0)}
}

// Conflict marks err as an optimistic-concurrency conflict, for conflicts the
// automatic rules cannot see (for example from a system outside Kubernetes).
// API-server 409 Conflict errors need no wrapping.
func Conflict(err error) error {
	e := &classified{class: ClassConflict, reason: ReasonConflict, err: err, after: ConflictRequeueAfter}
	e.message = messageOf(e)
	return e
}

func messageOf(e *classified) string {
	if e.err != nil {
		return e.err.Error()
	}
	return e.reason
}

// Classify decides the class of err (see the package documentation for the
// precedence of explicit wrappers). Errors without an explicit wrapper are
// classified automatically. API errors (apierrors.APIStatus) by their
// metav1.StatusReason — this is opkit's one error table, and every opkit
// package follows it:
//
//	status reason (code)                 class        reason          why
//	Conflict (409)                       Conflict     Conflict        a resourceVersion precondition failed: re-read shortly
//	Invalid (422) from a JSON patch      Conflict     Conflict        its "test" failed or a path it removes is gone (no causes,
//	  whose operations no longer apply                                the server's generic "rejected our request" message): the
//	                                                                  object changed since it was read, as with a 409
//	Invalid (422), any other             Terminal     Invalid         the object or request is invalid as written
//	BadRequest (400)                     Terminal     BadRequest      the request is malformed
//	MethodNotAllowed (405)               Terminal     MethodNotAllowed
//	NotAcceptable (406)                  Terminal     NotAcceptable
//	UnsupportedMediaType (415)           Terminal     UnsupportedMediaType
//	RequestEntityTooLarge (413)          Terminal     RequestEntityTooLarge  only a smaller object helps
//	AlreadyExists (409)                  Transient    AlreadyExists   a name taken by an object that may never go away: back off,
//	                                                                  never a hot loop (ensure resolves its own creates' races)
//	Unauthorized (401)                   Transient    Unauthorized    credentials are rotated outside the object
//	Forbidden (403)                      Transient    Forbidden       RBAC, quota, a terminating namespace: fixed outside the object
//	NotFound (404)                       Transient    NotFound        created independently, or the cache is behind
//	Gone (410), Expired (410)            Transient    Gone, Expired   a watch or continue token expired: list again
//	ServerTimeout, Timeout (504)         Transient    the reason
//	TooManyRequests (429)                Transient    TooManyRequests RequeueAfter = Retry-After
//	InternalError (500)                  Transient    InternalError
//	ServiceUnavailable (503)             Transient    ServiceUnavailable
//	StorageReadError (500)               Transient    StorageReadError
//	no known reason                      by the code: the row of the reason the code means (409 Conflict, 422 Invalid, …);
//	                                     Transient    APIError        for any other code
//
// A Transient API error that carries Retry-After gets RequeueAfter = that
// delay. Other errors:
//
//	reconcile.TerminalError                                    Terminal            "TerminalError"
//	context.DeadlineExceeded                                   Transient           "Timeout"
//	context.Canceled                                           Transient           "Canceled"
//	net.Error, io.EOF, io.ErrUnexpectedEOF, ECONNRESET,
//	ECONNREFUSED, EPIPE                                        Transient           "NetworkError"
//	anything else                                              Transient           "TransientError"
//
// Forbidden is Transient, not Terminal: the usual causes (missing RBAC, an
// exhausted ResourceQuota, a terminating namespace) are fixed outside the
// object, which bumps no generation, so a Terminal classification would stall
// the object for good. NotFound is Transient for the same reason: a missing
// referenced object is created independently, or the cache is behind. A caller
// that knows better wraps the error with [Terminal] or [DependencyNotReady].
func Classify(err error) Classification {
	if err == nil {
		return Classification{Class: ClassSuccess}
	}
	var c Classification
	var e *classified
	if errors.As(err, &e) {
		c = Classification{Class: e.class, Reason: e.reason, Message: e.message, RequeueAfter: e.after}
	} else {
		c = automatic(err)
	}
	if c.Class != ClassTerminal && errors.Is(err, reconcile.TerminalError(nil)) {
		c.Class, c.RequeueAfter = ClassTerminal, 0
	}
	return c
}

func automatic(err error) Classification {
	transient := func(reason string) Classification {
		return Classification{Class: ClassTransient, Reason: reason, Message: err.Error()}
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return apiStatus(err, status.Status())
	}
	var netErr net.Error
	switch {
	case errors.Is(err, reconcile.TerminalError(nil)):
		return Classification{Class: ClassTerminal, Reason: ReasonTerminalError, Message: err.Error()}
	case errors.Is(err, context.DeadlineExceeded):
		return transient(ReasonTimeout)
	case errors.Is(err, context.Canceled):
		return transient(ReasonCanceled)
	case errors.As(err, &netErr), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EPIPE):
		return transient(ReasonNetworkError)
	}
	return transient(ReasonTransientError)
}

// apiClasses is outcome's one error table for the API server's status
// reasons (metav1.StatusReason). Every opkit package classifies API errors
// through it; [Classify] documents each row.
var apiClasses = map[metav1.StatusReason]Class{
	metav1.StatusReasonConflict:              ClassConflict,
	metav1.StatusReasonInvalid:               ClassTerminal,
	metav1.StatusReasonBadRequest:            ClassTerminal,
	metav1.StatusReasonMethodNotAllowed:      ClassTerminal,
	metav1.StatusReasonNotAcceptable:         ClassTerminal,
	metav1.StatusReasonUnsupportedMediaType:  ClassTerminal,
	metav1.StatusReasonRequestEntityTooLarge: ClassTerminal,
	metav1.StatusReasonAlreadyExists:         ClassTransient,
	metav1.StatusReasonUnauthorized:          ClassTransient,
	metav1.StatusReasonForbidden:             ClassTransient,
	metav1.StatusReasonNotFound:              ClassTransient,
	metav1.StatusReasonGone:                  ClassTransient,
	metav1.StatusReasonExpired:               ClassTransient,
	metav1.StatusReasonServerTimeout:         ClassTransient,
	metav1.StatusReasonTimeout:               ClassTransient,
	metav1.StatusReasonTooManyRequests:       ClassTransient,
	metav1.StatusReasonInternalError:         ClassTransient,
	metav1.StatusReasonServiceUnavailable:    ClassTransient,
	metav1.StatusReasonStoreReadError:        ClassTransient,
}

// reasonsByCode gives a status that carries no known reason the reason its
// code means, as apierrors' Is… predicates do.
var reasonsByCode = map[int32]metav1.StatusReason{
	http.StatusConflict:              metav1.StatusReasonConflict,
	http.StatusUnprocessableEntity:   metav1.StatusReasonInvalid,
	http.StatusBadRequest:            metav1.StatusReasonBadRequest,
	http.StatusUnauthorized:          metav1.StatusReasonUnauthorized,
	http.StatusForbidden:             metav1.StatusReasonForbidden,
	http.StatusNotFound:              metav1.StatusReasonNotFound,
	http.StatusGone:                  metav1.StatusReasonGone,
	http.StatusMethodNotAllowed:      metav1.StatusReasonMethodNotAllowed,
	http.StatusNotAcceptable:         metav1.StatusReasonNotAcceptable,
	http.StatusRequestEntityTooLarge: metav1.StatusReasonRequestEntityTooLarge,
	http.StatusUnsupportedMediaType:  metav1.StatusReasonUnsupportedMediaType,
	http.StatusTooManyRequests:       metav1.StatusReasonTooManyRequests,
	http.StatusInternalServerError:   metav1.StatusReasonInternalError,
	http.StatusServiceUnavailable:    metav1.StatusReasonServiceUnavailable,
	http.StatusGatewayTimeout:        metav1.StatusReasonTimeout,
}

func apiStatus(err error, s metav1.Status) Classification {
	reason := s.Reason
	if _, known := apiClasses[reason]; !known {
		if r, ok := reasonsByCode[s.Code]; ok {
			reason = r
		}
	}
	c := Classification{Class: ClassTransient, Reason: SanitizeReason(string(reason), ReasonAPIError), Message: err.Error()}
	if class, ok := apiClasses[reason]; ok {
		c.Class = class
	}
	if isPatchPreconditionFailed(s) {
		c.Class, c.Reason = ClassConflict, ReasonConflict
	}
	switch c.Class {
	case ClassConflict:
		c.RequeueAfter = ConflictRequeueAfter
	case ClassTransient:
		if d, ok := apierrors.SuggestsClientDelay(err); ok && d > 0 {
			c.RequeueAfter = time.Duration(d) * time.Second
		}
	}
	return c
}

// patchNotApplicable is the message the API server gives (with code 422,
// reason Invalid and no causes) when a JSON patch's operations do not apply
// to the object as it now is: a "test" operation failed, or a path the
// patch removes or replaces is gone (apiserver's patch handler turns the
// json-patch error into NewGenericServerResponse(422, …), which drops the
// detail). Validation failures, by contrast, carry causes with field paths.
const patchNotApplicable = "the server rejected our request due to an error in our request"

// isPatchPreconditionFailed reports a 422 that says a JSON patch's
// preconditions no longer hold: another writer changed the object since it
// was read, exactly what a 409 says of a resourceVersion.
func isPatchPreconditionFailed(s metav1.Status) bool {
	return s.Code == http.StatusUnprocessableEntity && s.Reason == metav1.StatusReasonInvalid &&
		strings.HasPrefix(s.Message, patchNotApplicable) && (s.Details == nil || len(s.Details.Causes) == 0)
}

// Result turns err into what a Reconcile method returns (see the package
// documentation for the table):
//
//   - Success: (Result{}, nil); for [RequeueAfter],
//     (Result{RequeueAfter: after with up to RequeueJitter added}, nil).
//   - Conflict: (Result{RequeueAfter: ConflictRequeueAfter}, nil). The error is
//     not returned, so controller-runtime neither logs it nor counts it as a
//     reconcile error. RequeueAfter is used rather than the deprecated
//     Result.Requeue: in controller-runtime v0.25 Requeue is marked
//     "Deprecated: Use RequeueAfter instead" and will be removed.
//   - Transient: (Result{}, err), so the workqueue's per-object exponential
//     backoff applies and controller-runtime logs the error; when the API
//     server asked for a delay (Retry-After), (Result{RequeueAfter: delay}, nil)
//     instead, because controller-runtime ignores RequeueAfter when an error
//     is returned.
//   - DependencyNotReady: (Result{RequeueAfter: after}, nil): a fixed wait that
//     does not grow, and no error log.
//   - Terminal: (Result{}, terminal) where terminal is err itself when it
//     already wraps reconcile.TerminalError, else reconcile.TerminalError(err),
//     so controller-runtime records it once and does not requeue.
func Result(err error) (reconcile.Result, error) {
	c := Classify(err)
	switch c.Class {
	case ClassSuccess:
		if c.RequeueAfter > 0 {
			return reconcile.Result{RequeueAfter: wait.Jitter(c.RequeueAfter, RequeueJitter)}, nil
		}
		return reconcile.Result{}, nil
	case ClassConflict, ClassDependencyNotReady:
		return reconcile.Result{RequeueAfter: c.RequeueAfter}, nil
	case ClassTerminal:
		if errors.Is(err, reconcile.TerminalError(nil)) {
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, reconcile.TerminalError(err)
	default:
		if c.RequeueAfter > 0 {
			return reconcile.Result{RequeueAfter: c.RequeueAfter}, nil
		}
		return reconcile.Result{}, err
	}
}

// maxReasonLength is the API's limit on metav1.Condition.Reason.
const maxReasonLength = 1024

// SanitizeReason turns s into a valid metav1.Condition reason (pattern
// ^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$, at most 1024 bytes) in CamelCase:
// characters the pattern does not allow act as word separators and are
// dropped, each word after a separator starts with an upper-case letter, the
// first letter is upper-cased, leading characters other than letters and
// trailing ',' or ':' are dropped. A valid CamelCase reason is returned
// unchanged. When nothing is left, fallback is returned (unchecked).
func SanitizeReason(s, fallback string) string {
	out := make([]byte, 0, len(s))
	upper := true
	for i := 0; i < len(s) && len(out) < maxReasonLength; i++ {
		ch := s[i]
		isLetter := ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z'
		allowed := isLetter || ch >= '0' && ch <= '9' || ch == '_' || ch == ',' || ch == ':'
		switch {
		case !allowed:
			upper = true
			continue
		case len(out) == 0 && !isLetter:
			continue
		}
		if upper && ch >= 'a' && ch <= 'z' {
			ch -= 'a' - 'A'
		}
		upper = false
		out = append(out, ch)
	}
	for len(out) > 0 && (out[len(out)-1] == ',' || out[len(out)-1] == ':') {
		out = out[:len(out)-1]
	}
	if len(out) == 0 {
		return fallback
	}
	return string(out)
}
