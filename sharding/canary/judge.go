package canary

import (
	"fmt"
	"time"
)

// Verdict is what a [Judge] concludes from one [Sample].
type Verdict string

const (
	// Wait means nothing wrong yet, and the window has not passed.
	Wait Verdict = "Wait"
	// Pass means the canary held its share for the whole window no worse than
	// the stable version; the rollout widens (or, at the last step, promotes).
	Pass Verdict = "Pass"
	// Fail means the canary is worse than the stable version; the rollout rolls
	// back at once, without waiting for the window to end.
	Fail Verdict = "Fail"
)

// Cohort is what the rollout sees of one version's objects: those whose shard
// label names a member announcing that version.
type Cohort struct {
	// Version is the operator version ([sharding.VersionAnnotation]).
	Version string
	// Members are the ready members announcing Version, sorted.
	Members []string
	// Objects carry the shard label of one of Members (draining ones included).
	Objects int
	// Ready are those whose Ready condition is True for their current
	// generation (status.observedGeneration, when the object has one).
	Ready int
	// Stalled and Degraded are those with that condition True.
	Stalled, Degraded int
	// Late are those not Ready for longer than the ready timeout
	// ([WithReadyTimeout]) since they came to this cohort's members or
	// changed generation, whichever is later.
	Late int
	// MaxTimeToReady is the longest time, among objects that came to this
	// cohort during the rollout and have been Ready since, from their arrival
	// to the first time the rollout saw them Ready.
	MaxTimeToReady time.Duration
	// Errors are the reconcile errors of this version's members since the
	// current step began — while objects moved to their new members, then
	// through the step's window, and on through a roll back or promotion
	// from that step — as [WithErrorCounts] reports them (0 without it).
	// Errors made while the step settled count: a canary whose reconciles
	// fail as it takes its objects is judged on them at the window's first
	// check.
	Errors float64
}

// Unhealthy is Stalled + Degraded + Late (an object may count more than once).
func (c Cohort) Unhealthy() int { return c.Stalled + c.Degraded + c.Late }

func rate(n float64, objects int) float64 { return n / float64(max(objects, 1)) }

// Sample is what a [Judge] gets on every check of a step whose window has
// begun: both cohorts, the step's canary share, and how much of the window
// has passed.
type Sample struct {
	Canary, Stable Cohort
	// Percent is the canary's share of the hash space at this step.
	Percent int
	// Elapsed is the time since the window began (the step settled: every
	// object on the member the weighted ring places it on, none draining).
	Elapsed, Window time.Duration
}

// Judge decides a step. It must be a pure function of the sample.
type Judge func(Sample) (Verdict, string)

// DefaultJudge fails the canary as soon as its share of unhealthy objects
// (Stalled, Degraded or Late: [Cohort.Unhealthy]) or its reconcile errors per
// object exceeds the stable version's by more than tolerance (a fraction:
// 0.05 allows five more unhealthy objects in a hundred), provided the canary
// has at least one; it passes once the window has elapsed without that; and
// waits otherwise. A canary without objects at a step (a small share of few
// objects) passes at the end of the window: the next, wider step judges it.
func DefaultJudge(tolerance float64) Judge {
	return func(s Sample) (Verdict, string) {
		c, st := s.Canary, s.Stable
		if u := c.Unhealthy(); u > 0 && rate(float64(u), c.Objects) > rate(float64(st.Unhealthy()), st.Objects)+tolerance {
			return Fail, fmt.Sprintf("canary %s: %d of %d objects unhealthy (%d Stalled, %d Degraded, %d not Ready in time); stable %s: %d of %d",
				c.Version, u, c.Objects, c.Stalled, c.Degraded, c.Late, st.Version, st.Unhealthy(), st.Objects)
		}
		if c.Errors > 0 && rate(c.Errors, c.Objects) > rate(st.Errors, st.Objects)+tolerance {
			return Fail, fmt.Sprintf("canary %s: %.0f reconcile errors on %d objects; stable %s: %.0f on %d",
				c.Version, c.Errors, c.Objects, st.Version, st.Errors, st.Objects)
		}
		if s.Elapsed < s.Window {
			return Wait, fmt.Sprintf("judging %s at %d%% (%d objects) for %s from windowStart", c.Version, s.Percent, c.Objects, s.Window)
		}
		return Pass, fmt.Sprintf("canary %s held %d%% (%d objects) for %s: %d unhealthy, %.0f errors; stable %s: %d unhealthy of %d",
			c.Version, s.Percent, c.Objects, s.Window, c.Unhealthy(), c.Errors, st.Version, st.Unhealthy(), st.Objects)
	}
}
