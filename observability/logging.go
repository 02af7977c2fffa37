package observability

import (
	"context"
	"io"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Log keys added by [Observability.Wrap]. controller-runtime already adds
// "controller", "namespace", "name" and "reconcileID" to the reconcile's
// logger; Wrap adds them itself only when the reconciler runs outside a
// controller-runtime controller.
const (
	LogKeyTraceID     = "traceID"
	LogKeySpanID      = "spanID"
	LogKeyReconcileID = "reconcileID"
	LogKeyTrigger     = "trigger"
)

type logOptions struct {
	development bool
	out         io.Writer
	verbosity   int
	noTime      bool
}

// LogOption configures [NewLogger].
type LogOption func(*logOptions)

// WithLogDevelopment switches to development mode: human-readable console lines,
// debug verbosity and stack traces from warnings on. The default is
// production mode: one JSON object per line, info level, stack traces on errors.
func WithLogDevelopment(on bool) LogOption { return func(o *logOptions) { o.development = on } }

// WithLogOutput writes log lines to w (default os.Stderr).
func WithLogOutput(w io.Writer) LogOption { return func(o *logOptions) { o.out = w } }

// WithLogVerbosity enables logr V-levels up to v (default 0 in production).
func WithLogVerbosity(v int) LogOption { return func(o *logOptions) { o.verbosity = v } }

// WithoutLogTime leaves the timestamp out of every line, for log collectors
// that add their own and for reproducible output in tests and examples.
func WithoutLogTime() LogOption { return func(o *logOptions) { o.noTime = true } }

// NewLogger returns a zap-backed logr.Logger configured like
// controller-runtime's own zap helper, so it can be passed to
// ctrl.SetLogger and manager.Options.Logger.
func NewLogger(opts ...LogOption) logr.Logger {
	var o logOptions
	for _, opt := range opts {
		opt(&o)
	}
	zopts := []crzap.Opts{crzap.UseDevMode(o.development)}
	if o.out != nil {
		zopts = append(zopts, crzap.WriteTo(o.out))
	}
	if o.verbosity > 0 {
		// zap levels are int8; logr V-levels beyond 127 mean "everything".
		zopts = append(zopts, crzap.Level(zapcore.Level(-int8(min(o.verbosity, 127)))))
	}
	if o.noTime {
		zopts = append(zopts, func(co *crzap.Options) {
			co.EncoderConfigOptions = append(co.EncoderConfigOptions, func(ec *zapcore.EncoderConfig) { ec.TimeKey = "" })
		})
	}
	return crzap.New(zopts...)
}

// enrichLogger returns ctx with a logger that carries the trace and span IDs
// of span, and the object and a reconcile ID when controller-runtime did not
// already add them (it adds them to every reconcile it runs, with a
// reconcile ID retrievable from the context).
func enrichLogger(ctx context.Context, controllerName string, req reconcile.Request, span trace.Span) (context.Context, string) {
	log := logf.FromContext(ctx)
	reconcileID := string(controller.ReconcileIDFromContext(ctx))
	if reconcileID == "" {
		reconcileID = string(uuid.NewUUID())
		log = log.WithValues("controller", controllerName, "namespace", req.Namespace, "name", req.Name, LogKeyReconcileID, reconcileID)
	}
	if sc := span.SpanContext(); sc.IsValid() {
		log = log.WithValues(LogKeyTraceID, sc.TraceID().String(), LogKeySpanID, sc.SpanID().String())
	}
	return logf.IntoContext(ctx, log), reconcileID
}
