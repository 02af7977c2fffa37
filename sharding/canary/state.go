package canary

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// ActionAnnotation on the rollout's ConfigMap ([StateName]) is how a
	// person steers it: "pause" holds the current share and stops judging,
	// "resume" continues (the step's window starts again), "promote" moves
	// every object to the canary at once and makes it the stable version,
	// "abort" rolls back. The rollout removes the annotation once it acted
	// on it and records it as lastAction; an action that does not apply to
	// the current phase (abort when nothing is rolling out) is removed and
	// recorded as ignored.
	//
	//	kubectl annotate configmap canary-<ring> canary.opkit.dev/action=abort
	ActionAnnotation = "canary.opkit.dev/action"

	// RingLabel is set on the rollout's ConfigMap to the ring's name:
	// `kubectl get cm -l canary.opkit.dev/ring` lists the rollouts.
	RingLabel = "canary.opkit.dev/ring"
)

// Actions a person writes into [ActionAnnotation].
const (
	ActionPause   = "pause"
	ActionResume  = "resume"
	ActionPromote = "promote"
	ActionAbort   = "abort"
)

// StateName is the name of the ConfigMap, in the ring's lease namespace,
// holding the rollout's [State]: "canary-<ring>".
func StateName(ring string) string { return "canary-" + ring }

// Phase is where a rollout stands.
type Phase string

const (
	// PhaseIdle means one version runs (or none yet); nothing is rolling out.
	PhaseIdle Phase = "Idle"
	// PhaseProgressing means the canary holds the share of the current step and
	// is judged once every object is where the weighted ring places it.
	PhaseProgressing Phase = "Progressing"
	// PhasePaused means a person paused; the share is held and nothing is judged.
	PhasePaused Phase = "Paused"
	// PhasePromoting means a person promoted; every object moves to the canary.
	PhasePromoting Phase = "Promoting"
	// PhasePromoted means the canary owns every object and is the stable version
	// now; members of the previous version keep weight 0.
	PhasePromoted Phase = "Promoted"
	// PhaseRollingBack means the canary failed or was aborted; its weight is 0
	// and its objects drain back to the stable members.
	PhaseRollingBack Phase = "RollingBack"
	// PhaseRolledBack means no object is on a canary member any more; the canary
	// members keep weight 0 until they are removed. The same canary version
	// is not rolled out again; a different one starts a new rollout.
	PhaseRolledBack Phase = "RolledBack"
)

// State is a rollout's state, as kept in its ConfigMap's data (one key per
// field, readable with `kubectl get cm canary-<ring> -o yaml`).
type State struct {
	Phase Phase
	// StableVersion runs the objects the canary does not have.
	StableVersion string
	// CanaryVersion is being rolled out (or was, when Phase is RolledBack).
	CanaryVersion string
	// PreviousVersion is the stable version before the last promotion: its
	// members are never taken for a canary.
	PreviousVersion string
	// Step is the index of the current step in the steps ([WithSteps]);
	// Percent is the canary's share at it (0 when rolling back, 100 when
	// promoting).
	Step, Percent int
	// Canary and Stable are the cohorts at the last check.
	Canary, Stable Cohort
	// Verdict and Message are the judge's last word (or why the rollout waits).
	Verdict Verdict
	Message string
	// Started is when the rollout of CanaryVersion began; Since is when
	// Phase was entered; WindowStart is when the current step settled (zero
	// while it has not).
	Started, Since, WindowStart time.Time
	// LastAction is the last [ActionAnnotation] acted on (or ignored).
	LastAction string
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func parseTime(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}

// atoi reads a count or index back: 0 for anything but a decimal integer
// of at least 0 (a negative step would index the steps out of range).
func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// atof reads an error count back: 0 for anything but a finite number of at
// least 0 (NaN would pass every comparison a judge makes with it).
func atof(s string) float64 {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return f
}

// data renders s as the ConfigMap's data.
func (s State) data() map[string]string {
	d := map[string]string{
		"phase":           string(s.Phase),
		"stableVersion":   s.StableVersion,
		"canaryVersion":   s.CanaryVersion,
		"previousVersion": s.PreviousVersion,
		"step":            strconv.Itoa(s.Step),
		"percent":         strconv.Itoa(s.Percent),
		"canaryMembers":   strings.Join(s.Canary.Members, ","),
		"stableMembers":   strings.Join(s.Stable.Members, ","),
		"canaryObjects":   strconv.Itoa(s.Canary.Objects),
		"stableObjects":   strconv.Itoa(s.Stable.Objects),
		"canaryUnhealthy": strconv.Itoa(s.Canary.Unhealthy()),
		"stableUnhealthy": strconv.Itoa(s.Stable.Unhealthy()),
		"canaryErrors":    strconv.FormatFloat(s.Canary.Errors, 'f', -1, 64),
		"stableErrors":    strconv.FormatFloat(s.Stable.Errors, 'f', -1, 64),
		"verdict":         string(s.Verdict),
		"message":         s.Message,
		"started":         fmtTime(s.Started),
		"since":           fmtTime(s.Since),
		"windowStart":     fmtTime(s.WindowStart),
		"lastAction":      s.LastAction,
	}
	for k, v := range d {
		if v == "" {
			delete(d, k)
		}
	}
	return d
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// stateFrom parses a ConfigMap's data. Cohorts come back with Members,
// Objects, Errors and, as Stalled, their unhealthy count only. A number that
// is missing, malformed or out of range (negative, not finite) reads as 0.
func stateFrom(d map[string]string) State {
	s := State{
		Phase:           Phase(d["phase"]),
		StableVersion:   d["stableVersion"],
		CanaryVersion:   d["canaryVersion"],
		PreviousVersion: d["previousVersion"],
		Step:            atoi(d["step"]),
		Percent:         atoi(d["percent"]),
		Verdict:         Verdict(d["verdict"]),
		Message:         d["message"],
		Started:         parseTime(d["started"]),
		Since:           parseTime(d["since"]),
		WindowStart:     parseTime(d["windowStart"]),
		LastAction:      d["lastAction"],
	}
	s.Canary = Cohort{Version: s.CanaryVersion, Members: split(d["canaryMembers"]), Objects: atoi(d["canaryObjects"]),
		Stalled: atoi(d["canaryUnhealthy"]), Errors: atof(d["canaryErrors"])}
	s.Stable = Cohort{Version: s.StableVersion, Members: split(d["stableMembers"]), Objects: atoi(d["stableObjects"]),
		Stalled: atoi(d["stableUnhealthy"]), Errors: atof(d["stableErrors"])}
	if s.Phase == "" {
		s.Phase = PhaseIdle
	}
	return s
}

// Get reads the state of ring's rollout from its ConfigMap in namespace. The
// cohorts it returns carry Members, Objects, Errors and, in Stalled, the
// number of unhealthy objects (the ConfigMap keeps only that sum). A rollout that has
// not written its ConfigMap yet is a NotFound error.
func Get(ctx context.Context, c client.Reader, ring, namespace string) (State, error) {
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: StateName(ring)}, cm); err != nil {
		return State{}, fmt.Errorf("canary: rollout state %s/%s: %w", namespace, StateName(ring), err)
	}
	return stateFrom(cm.Data), nil
}
