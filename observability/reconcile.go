package observability

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/opkit/opkit/outcome"
)

// Classifier maps a reconcile's error to a result class, a label value of
// opkit_reconcile_total. It must return values from a small fixed set.
type Classifier func(error) string

// ResultPanic is the result class recorded when the wrapped reconciler panics.
const ResultPanic = "panic"

// DefaultClassifier returns the outcome class of err in lower case, by
// github.com/opkit/opkit/outcome's one error table: "success" (nil),
// "conflict", "transient", "dependencynotready" or "terminal". A reconciler
// built with outcome.Result returns nil for conflicts and dependency waits,
// which then count as "success" (they are requeues, not failures).
func DefaultClassifier(err error) string {
	return strings.ToLower(outcome.Classify(err).Class.String())
}

// DefaultClasses are the classes [DefaultClassifier] returns.
var DefaultClasses = []string{"success", "conflict", "transient", "dependencynotready", "terminal"}

type wrapOptions struct{ kind string }

// WrapOption configures [Observability.Wrap].
type WrapOption func(*wrapOptions)

// WithObjectKind names the kind the wrapped reconciler reconciles, for the
// opkit.object.kind span attribute.
func WithObjectKind(kind string) WrapOption { return func(o *wrapOptions) { o.kind = kind } }

type wrapped struct {
	o          *Observability
	controller string
	kind       string
	inner      reconcile.Reconciler
}

// Reconcile runs the inner reconciler inside a span and records its outcome.
func (w *wrapped) Reconcile(ctx context.Context, req reconcile.Request) (res reconcile.Result, err error) {
	start := time.Now()
	o := w.o
	trig := o.triggers.take(w.controller, req)
	attrs := []attribute.KeyValue{
		AttrController.String(w.controller),
		AttrObjectNamespace.String(req.Namespace),
		AttrObjectName.String(req.Name),
		AttrTriggerEvent.String(trig.Event),
	}
	if w.kind != "" {
		attrs = append(attrs, AttrObjectKind.String(w.kind))
	}
	if trig.Kind != "" {
		attrs = append(attrs,
			AttrTriggerKind.String(trig.Kind),
			AttrTriggerNamespace.String(trig.Namespace),
			AttrTriggerName.String(trig.Name),
			AttrTriggerCoalesced.Int(trig.Coalesced))
	}
	ctx, span := o.tracer.Start(ctx, "reconcile "+w.controller, trace.WithAttributes(attrs...))
	ctx, reconcileID := enrichLogger(ctx, w.controller, req, span)
	span.SetAttributes(AttrReconcileID.String(reconcileID))
	ctx = context.WithValue(ctx, triggerCtxKey{}, trig)

	defer func() {
		class := ""
		if p := recover(); p != nil {
			class = ResultPanic
			err = fmt.Errorf("panic: %v", p)
			defer panic(p) // after recording; controller-runtime recovers it if configured
		} else {
			class = o.classify(err)
		}
		if err != nil && !errors.Is(err, reconcile.TerminalError(nil)) || res.RequeueAfter > 0 || res.Requeue { //nolint:staticcheck // Requeue is still honoured by controller-runtime
			o.triggers.markRequeue(w.controller, req)
		}
		d := time.Since(start)
		o.metrics.ObserveReconcile(w.controller, class, d)
		o.status.observe(w.controller, class, start, d)
		span.SetAttributes(AttrResult.String(class))
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}()
	return w.inner.Reconcile(ctx, req)
}
