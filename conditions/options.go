package conditions

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
)

// Each function takes only the options that mean something to it: an option
// is a value of a type that implements the option interfaces of exactly the
// functions it applies to, so passing, say, [WithPositive] to [MarkReady]
// does not compile.
//
//	option              Set  Mark*/ApplyOutcome  Summarize/SetSummary  Mirror
//	WithClock            ✓           ✓                  ✓                 ✓
//	WithSummaryType                  ✓
//	WithPositive                                        ✓
//	WithNegative                                        ✓
//	WithTrueReason                                      ✓
//	WithDefault                                                           ✓

// SetOption configures [Set] and [Status.Set].
type SetOption interface{ applyToSet(*setOptions) }

// MarkOption configures [MarkReady], [MarkReconciling], [MarkStalled] and
// [ApplyOutcome] (and their [Status] methods).
type MarkOption interface{ applyToMark(*markOptions) }

// SummaryOption configures [Summarize] and [SetSummary].
type SummaryOption interface{ applyToSummary(*summaryOptions) }

// MirrorOption configures [Mirror].
type MirrorOption interface{ applyToMirror(*mirrorOptions) }

type setOptions struct{ clock clock.PassiveClock }

type markOptions struct {
	setOptions
	summary string
}

type summaryOptions struct {
	setOptions
	positive   []string
	negative   []string
	trueReason string
}

type mirrorOptions struct {
	setOptions
	dflt *metav1.Condition
}

func newSetOptions(opts []SetOption) setOptions {
	o := setOptions{clock: clock.RealClock{}}
	for _, opt := range opts {
		opt.applyToSet(&o)
	}
	return o
}

func newMarkOptions(opts []MarkOption) markOptions {
	o := markOptions{setOptions: setOptions{clock: clock.RealClock{}}, summary: Ready}
	for _, opt := range opts {
		opt.applyToMark(&o)
	}
	return o
}

func newSummaryOptions(opts []SummaryOption) summaryOptions {
	o := summaryOptions{setOptions: setOptions{clock: clock.RealClock{}}, trueReason: ReasonSucceeded}
	for _, opt := range opts {
		opt.applyToSummary(&o)
	}
	return o
}

func newMirrorOptions(opts []MirrorOption) mirrorOptions {
	o := mirrorOptions{setOptions: setOptions{clock: clock.RealClock{}}}
	for _, opt := range opts {
		opt.applyToMirror(&o)
	}
	return o
}

// ClockOption is the option [WithClock] returns; it applies to every
// function of this package that writes a condition.
type ClockOption struct{ clock clock.PassiveClock }

// WithClock sets the clock lastTransitionTime is read from (default: the
// wall clock). A nil clock keeps the default.
func WithClock(c clock.PassiveClock) ClockOption { return ClockOption{clock: c} }

func (o ClockOption) applyToSet(s *setOptions) {
	if o.clock != nil {
		s.clock = o.clock
	}
}
func (o ClockOption) applyToMark(m *markOptions)       { o.applyToSet(&m.setOptions) }
func (o ClockOption) applyToSummary(s *summaryOptions) { o.applyToSet(&s.setOptions) }
func (o ClockOption) applyToMirror(m *mirrorOptions)   { o.applyToSet(&m.setOptions) }

// SummaryTypeOption is the option [WithSummaryType] returns.
type SummaryTypeOption string

// WithSummaryType names the operator's own summary condition (default
// [Ready]), which the Mark helpers and [ApplyOutcome] set instead of Ready:
// an operator that summarises in "Available" passes
// WithSummaryType("Available") and never gets a Ready condition from opkit.
func WithSummaryType(t string) SummaryTypeOption { return SummaryTypeOption(t) }

func (o SummaryTypeOption) applyToMark(m *markOptions) {
	if o != "" {
		m.summary = string(o)
	}
}

// PolarityOption is the option [WithPositive] and [WithNegative] return.
type PolarityOption struct {
	types    []string
	negative bool
}

// WithPositive names sub-conditions of a summary that are healthy when True
// ("Available", "DatabaseReady"). A positive sub-condition that is missing
// counts as Unknown.
func WithPositive(types ...string) PolarityOption { return PolarityOption{types: types} }

// WithNegative names sub-conditions of a summary that are healthy when False
// or missing ([Degraded], "OutOfDate"): abnormal-true conditions in kstatus's
// sense, often removed when they do not apply.
func WithNegative(types ...string) PolarityOption {
	return PolarityOption{types: types, negative: true}
}

func (o PolarityOption) applyToSummary(s *summaryOptions) {
	if o.negative {
		s.negative = append(s.negative, o.types...)
	} else {
		s.positive = append(s.positive, o.types...)
	}
}

// TrueReasonOption is the option [WithTrueReason] returns.
type TrueReasonOption string

// WithTrueReason sets the summary's reason when every sub-condition is
// healthy (default [ReasonSucceeded]).
func WithTrueReason(reason string) TrueReasonOption { return TrueReasonOption(reason) }

func (o TrueReasonOption) applyToSummary(s *summaryOptions) { s.trueReason = string(o) }

// DefaultOption is the option [WithDefault] returns.
type DefaultOption metav1.Condition

// WithDefault sets the condition [Mirror] writes when the child has not
// reported the mirrored type (default: Unknown, reason NotYetReported,
// naming the child).
func WithDefault(status metav1.ConditionStatus, reason, message string) DefaultOption {
	return DefaultOption{Status: status, Reason: reason, Message: message}
}

func (o DefaultOption) applyToMirror(m *mirrorOptions) {
	c := metav1.Condition(o)
	m.dflt = &c
}
