package canary

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/sharding"
)

// DefaultSteps are the canary's shares, in percent, one step after another.
var DefaultSteps = []int{10, 25, 50, 100}

// Rollout rolls a new operator version out over a sharding ring: see the
// package documentation. Create it with [New], add it to the manager with
// [Rollout.SetupWithManager]; it runs only on the replica elected through the
// manager's leader election, like the ring's [sharding.Assigner].
type Rollout struct {
	ring, namespace string
	proto           client.Object
	steps           []int
	window          time.Duration
	readyTimeout    time.Duration
	interval        time.Duration
	judge           Judge
	clock           clock.WithTicker
	observer        Observer
	recorder        events.EventRecorder
	errorCounts     func(ctx context.Context, version string) (float64, error)
	namespaces      []string

	mgr   manager.Manager
	gvk   schema.GroupVersionKind
	cache cache.Cache

	membership *sharding.Membership
	tracked    map[client.ObjectKey]*tracked
	baseline   map[string]float64 // version → error count at the step's start
}

type tracked struct {
	member      string
	generation  int64
	since       time.Time
	ready       bool
	arrived     bool // came to member during the rollout (not present at the first check)
	timeToReady time.Duration
}

// Option configures [New].
type Option interface{ applyToRollout(*Rollout) }

type optionFunc func(*Rollout)

func (f optionFunc) applyToRollout(r *Rollout) { f(r) }

// WithSteps sets the canary's shares in percent (each in 1..100, increasing;
// default [DefaultSteps]). A last step below 100 is followed by 100.
func WithSteps(percent ...int) Option {
	return optionFunc(func(r *Rollout) { r.steps = percent })
}

// WithWindow sets how long the canary must hold each step, once it settled,
// before a Pass (default 5 minutes). A Fail does not wait for it.
func WithWindow(d time.Duration) Option { return optionFunc(func(r *Rollout) { r.window = d }) }

// WithReadyTimeout sets how long an object may stay not Ready after it came
// to a member (or changed generation) before it counts as Late (default: the
// window).
func WithReadyTimeout(d time.Duration) Option {
	return optionFunc(func(r *Rollout) { r.readyTimeout = d })
}

// WithInterval sets how often the rollout checks (default 1s).
func WithInterval(d time.Duration) Option {
	return optionFunc(func(r *Rollout) { r.interval = max(d, 10*time.Millisecond) })
}

// WithJudge sets the judge (default DefaultJudge(0)).
func WithJudge(j Judge) Option { return optionFunc(func(r *Rollout) { r.judge = j }) }

// WithClock sets the clock used for windows, timeouts and timestamps (a fake
// one in tests).
func WithClock(c clock.WithTicker) Option { return optionFunc(func(r *Rollout) { r.clock = c }) }

// WithObserver sets the [Observer] ([Metrics] is one; default [NopObserver]).
func WithObserver(o Observer) Option { return optionFunc(func(r *Rollout) { r.observer = o }) }

// WithEventRecorder makes the rollout emit Normal events on its ConfigMap:
// CanaryStarted, CanaryWidened, CanaryPromoted, CanaryPaused, CanaryResumed,
// and Warning events CanaryRollingBack and CanaryRolledBack.
func WithEventRecorder(rec events.EventRecorder) Option {
	return optionFunc(func(r *Rollout) { r.recorder = rec })
}

// WithErrorCounts gives the rollout each version's reconcile errors: f
// returns the errors counted so far, summed over the members of a version (a
// counter, e.g. controller_runtime_reconcile_errors_total scraped from them).
// The rollout takes the difference since each step began ([Cohort.Errors]).
// An error from f leaves Errors as they were at the previous check.
func WithErrorCounts(f func(ctx context.Context, version string) (float64, error)) Option {
	return optionFunc(func(r *Rollout) { r.errorCounts = f })
}

// WithNamespaces restricts the judged objects to these namespaces (default:
// all namespaces).
func WithNamespaces(ns ...string) Option {
	return optionFunc(func(r *Rollout) { r.namespaces = append(r.namespaces, ns...) })
}

// New returns the rollout of ring, whose member Leases live in
// leaseNamespace (its ConfigMap goes there too), judging the objects of obj's
// type (a prototype such as &v1.WebApp{}, in the manager's scheme; the type
// the ring's assigner distributes, with status conditions).
func New(ring, leaseNamespace string, obj client.Object, opts ...Option) (*Rollout, error) {
	if ring == "" || leaseNamespace == "" || obj == nil {
		return nil, errors.New("canary: New needs a ring, a lease namespace and an object type")
	}
	r := &Rollout{
		ring: ring, namespace: leaseNamespace, proto: obj,
		steps:    DefaultSteps,
		window:   5 * time.Minute,
		interval: time.Second,
		judge:    DefaultJudge(0),
		clock:    clock.RealClock{},
		observer: NopObserver{},
	}
	for _, o := range opts {
		o.applyToRollout(r)
	}
	if r.readyTimeout == 0 {
		r.readyTimeout = r.window
	}
	for i, p := range r.steps {
		if p < 1 || p > 100 || (i > 0 && p <= r.steps[i-1]) {
			return nil, fmt.Errorf("canary: steps %v: each must be in 1..100 and greater than the one before", r.steps)
		}
	}
	if len(r.steps) == 0 || r.steps[len(r.steps)-1] != 100 {
		r.steps = append(slices.Clone(r.steps), 100)
	}
	return r, nil
}

// SetupWithManager resolves the object type with mgr's scheme and adds the
// rollout to mgr.
func (r *Rollout) SetupWithManager(mgr manager.Manager) error {
	gvk, err := apiutil.GVKForObject(r.proto, mgr.GetScheme())
	if err != nil {
		return fmt.Errorf("canary: %w", err)
	}
	r.mgr, r.gvk = mgr, gvk
	return mgr.Add(r)
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: only the
// elected replica steers the rollout.
func (r *Rollout) NeedLeaderElection() bool { return true }

// Start runs the rollout until ctx ends: a check every interval.
func (r *Rollout) Start(ctx context.Context) error {
	if r.mgr == nil {
		return errors.New("canary: Rollout.Start before SetupWithManager")
	}
	logger := log.FromContext(ctx).WithValues("ring", r.ring, "component", "canary")
	ctx = log.IntoContext(ctx, logger)
	var defaultNS map[string]cache.Config
	for _, ns := range r.namespaces {
		if defaultNS == nil {
			defaultNS = map[string]cache.Config{}
		}
		defaultNS[ns] = cache.Config{}
	}
	objs := &unstructured.Unstructured{}
	objs.SetGroupVersionKind(r.gvk)
	c, err := cache.New(r.mgr.GetConfig(), cache.Options{
		DefaultNamespaces: defaultNS,
		Scheme:            r.mgr.GetScheme(),
		Mapper:            r.mgr.GetRESTMapper(),
		DefaultTransform:  cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&coordinationv1.Lease{}: {
				Namespaces: map[string]cache.Config{r.namespace: {}},
				Label:      labels.SelectorFromSet(labels.Set{sharding.RingLabel: r.ring}),
			},
			&corev1.ConfigMap{}: {
				Namespaces: map[string]cache.Config{r.namespace: {}},
				Field:      fields.OneTermEqualSelector("metadata.name", StateName(r.ring)),
			},
		},
	})
	if err != nil {
		return fmt.Errorf("canary: cache: %w", err)
	}
	r.cache = c
	for _, o := range []client.Object{&coordinationv1.Lease{}, &corev1.ConfigMap{}, objs} {
		if _, err := c.GetInformer(ctx, o); err != nil {
			return fmt.Errorf("canary: informer: %w", err)
		}
	}
	cacheDone := make(chan error, 1)
	go func() { cacheDone <- c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		select {
		case <-ctx.Done(): // stopped (or lost the election) while syncing
			return nil
		default:
		}
		return fmt.Errorf("canary: cache did not sync: %w", <-cacheDone)
	}
	r.membership = sharding.NewMembership(sharding.WithClock(r.clock))
	r.tracked = map[client.ObjectKey]*tracked{}
	r.baseline = map[string]float64{}
	first := true
	for {
		if err := r.check(ctx, first); err != nil && ctx.Err() == nil && !apierrors.IsConflict(err) {
			logger.Error(err, "canary check")
		}
		first = false
		t := r.clock.NewTimer(r.interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
	}
}

// view is what one check sees.
type view struct {
	ready    []string          // ready members, sorted
	versions map[string]string // member → version
	weights  map[string]int    // member → weight on its Lease
	leases   map[string]*coordinationv1.Lease
}

func (r *Rollout) check(ctx context.Context, first bool) error {
	now := r.clock.Now()
	cm := &corev1.ConfigMap{}
	err := r.cache.Get(ctx, client.ObjectKey{Namespace: r.namespace, Name: StateName(r.ring)}, cm)
	switch {
	case apierrors.IsNotFound(err):
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: r.namespace, Name: StateName(r.ring),
			Labels: map[string]string{RingLabel: r.ring}}}
		st := State{Phase: PhaseIdle, Since: now, Message: "no member announced a version yet"}
		cm.Data = st.data()
		if err := r.mgr.GetClient().Create(ctx, cm); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("canary: create %s/%s: %w", r.namespace, StateName(r.ring), err)
		}
		return nil // the cache shows it on a later check
	case err != nil:
		return err
	}
	before := cm.DeepCopy()
	st := stateFrom(cm.Data)
	prev := st

	v, err := r.readLeases(ctx)
	if err != nil {
		return err
	}
	action := cm.Annotations[ActionAnnotation]
	if action != "" {
		delete(cm.Annotations, ActionAnnotation)
		r.act(ctx, cm, &st, action, now)
	}
	r.chooseVersions(ctx, cm, &st, v, now)

	canaryMembers, stableMembers, others := r.cohortMembers(st, v)
	target := r.targetWeights(st, canaryMembers, stableMembers, others)
	pending, err := r.applyWeights(ctx, v, target)
	if err != nil {
		return err
	}

	canary, stable, settled, why, err := r.observe(ctx, st, v, first, now)
	if err != nil {
		return err
	}
	canary.Members, stable.Members = canaryMembers, stableMembers
	settled = settled && !pending
	if pending {
		why = "member weights are being written"
	}
	canary.Errors, stable.Errors = r.errorsSince(ctx, st.CanaryVersion, st.Canary.Errors), r.errorsSince(ctx, st.StableVersion, st.Stable.Errors)
	st.Canary, st.Stable = canary, stable
	r.advance(ctx, cm, &st, settled, why, now)

	r.observer.Checked(r.ring, st)
	if !maps.Equal(st.data(), prev.data()) || !maps.Equal(cm.Annotations, before.Annotations) {
		cm.Data = st.data()
		if err := r.mgr.GetClient().Patch(ctx, cm, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("canary: write %s/%s: %w", r.namespace, StateName(r.ring), err)
		}
	}
	return nil
}

func (r *Rollout) readLeases(ctx context.Context) (view, error) {
	var leases coordinationv1.LeaseList
	if err := r.cache.List(ctx, &leases, client.InNamespace(r.namespace), client.MatchingLabels{sharding.RingLabel: r.ring}); err != nil {
		return view{}, err
	}
	v := view{versions: map[string]string{}, weights: map[string]int{}, leases: map[string]*coordinationv1.Lease{}}
	seen := map[string]bool{}
	for i := range leases.Items {
		l := &leases.Items[i]
		m := l.Labels[sharding.MemberLabel]
		if m == "" {
			continue
		}
		seen[m] = true
		r.membership.Observe(l)
		v.versions[m], v.weights[m], v.leases[m] = sharding.LeaseVersion(l), sharding.LeaseWeight(l), l
	}
	for m := range r.membership.States() {
		if !seen[m] {
			r.membership.Forget(m)
		}
	}
	v.ready = r.membership.Ready()
	return v, nil
}

func (r *Rollout) event(cm *corev1.ConfigMap, warning bool, reason, format string, args ...any) {
	if r.recorder == nil {
		return
	}
	t := corev1.EventTypeNormal
	if warning {
		t = corev1.EventTypeWarning
	}
	r.recorder.Eventf(cm, nil, t, reason, "Rollout", format, args...)
}

func (r *Rollout) enter(st *State, p Phase, now time.Time) {
	st.Phase, st.Since, st.WindowStart = p, now, time.Time{}
}

// act applies a person's action.
func (r *Rollout) act(ctx context.Context, cm *corev1.ConfigMap, st *State, action string, now time.Time) {
	rolling := st.Phase == PhaseProgressing || st.Phase == PhasePaused
	done := true
	switch {
	case action == ActionPause && st.Phase == PhaseProgressing:
		r.enter(st, PhasePaused, now)
		r.event(cm, false, "CanaryPaused", "paused at %d%% by %s", st.Percent, ActionAnnotation)
	case action == ActionResume && st.Phase == PhasePaused:
		r.enter(st, PhaseProgressing, now)
		r.event(cm, false, "CanaryResumed", "resumed at %d%%; the step's window starts again", st.Percent)
	case action == ActionPromote && rolling:
		r.enter(st, PhasePromoting, now)
		st.Percent, st.Message = 100, fmt.Sprintf("promoted at %d%% by %s", st.Percent, ActionAnnotation)
		r.event(cm, false, "CanaryPromoted", "promoting %s to every object by %s", st.CanaryVersion, ActionAnnotation)
	case action == ActionAbort && (rolling || st.Phase == PhasePromoting):
		r.enter(st, PhaseRollingBack, now)
		st.Percent, st.Message = 0, fmt.Sprintf("aborted at %d%% by %s", st.Percent, ActionAnnotation)
		r.event(cm, true, "CanaryRollingBack", "rolling %s back by %s", st.CanaryVersion, ActionAnnotation)
	default:
		done = false
	}
	if done {
		st.LastAction = action
		r.observer.Decided(r.ring, "", action)
		log.FromContext(ctx).Info("canary action", "action", action, "phase", st.Phase)
		return
	}
	st.LastAction = action + " (ignored in phase " + string(st.Phase) + ")"
}

// chooseVersions settles the stable version and starts a rollout when a
// member announces a version not seen before.
func (r *Rollout) chooseVersions(ctx context.Context, cm *corev1.ConfigMap, st *State, v view, now time.Time) {
	if st.StableVersion == "" {
		// The version of most ready members of weight > 0 is the stable one.
		count := map[string]int{}
		for _, m := range v.ready {
			if v.weights[m] > 0 {
				count[v.versions[m]]++
			}
		}
		best := ""
		for ver, n := range count {
			if ver != "" && (best == "" || n > count[best] || n == count[best] && ver < best) {
				best = ver
			}
		}
		if best == "" {
			st.Message = "no ready member of weight > 0 announces a version yet"
			return
		}
		st.StableVersion = best
		st.Message = "stable version " + best
	}
	switch st.Phase {
	case PhaseIdle, PhasePromoted, PhaseRolledBack:
	default:
		return
	}
	for _, m := range v.ready {
		ver := v.versions[m]
		if ver == "" || ver == st.StableVersion || ver == st.PreviousVersion ||
			(st.Phase == PhaseRolledBack && ver == st.CanaryVersion) {
			continue
		}
		st.CanaryVersion, st.Step, st.Percent, st.Verdict = ver, 0, r.steps[0], ""
		st.Started = now
		r.enter(st, PhaseProgressing, now)
		clear(r.baseline) // errors count from the first step's start
		st.Message = fmt.Sprintf("rolling %s out: %d%% first", ver, r.steps[0])
		r.event(cm, false, "CanaryStarted", "member %s announces %s; rolling it out to %d%% of the objects first", m, ver, r.steps[0])
		log.FromContext(ctx).Info("canary rollout started", "canary", ver, "stable", st.StableVersion, "member", m)
		return
	}
}

// cohortMembers splits the ready members by version: the canary's, the
// stable one's, and any other (a rolled-back canary, the previous version).
func (r *Rollout) cohortMembers(st State, v view) (canary, stable, others []string) {
	for _, m := range v.ready {
		switch ver := v.versions[m]; {
		case st.CanaryVersion != "" && ver == st.CanaryVersion:
			canary = append(canary, m)
		case ver == st.StableVersion:
			stable = append(stable, m)
		default:
			others = append(others, m)
		}
	}
	return canary, stable, others
}

// targetWeights returns the weights the phase asks of the members, or nil
// when it asks nothing (idle, promoted, rolled back: weights stay as they are).
func (r *Rollout) targetWeights(st State, canary, stable, others []string) map[string]int {
	var p int
	switch st.Phase {
	case PhaseProgressing, PhasePaused:
		p = st.Percent
	case PhasePromoting:
		p = 100
	case PhaseRollingBack:
		p = 0
	default:
		return nil
	}
	if len(canary) == 0 && p > 0 {
		return nil // nothing to give the share to; the stable keeps everything
	}
	w := Weights(p, canary, stable)
	for _, m := range others {
		w[m] = 0
	}
	return w
}

// Weights returns member weights giving the canary members together about
// percent of the ring: at 0 the canary members weigh 0 and the stable ones
// [sharding.DefaultWeight]; at 100 the other way round; in between every
// stable member weighs DefaultWeight and every canary member
// round(DefaultWeight × |stable| × percent / ((100 − percent) × |canary|)),
// at least 1 and at most [sharding.MaxWeight] (a larger weight would read
// back from the Lease as MaxWeight, and the rollout would wait for it
// forever).
func Weights(percent int, canary, stable []string) map[string]int {
	out := make(map[string]int, len(canary)+len(stable))
	wc, ws := 0, sharding.DefaultWeight
	switch {
	case percent >= 100:
		wc, ws = sharding.DefaultWeight, 0
	case percent > 0 && len(canary) > 0:
		wc = min(max(1, int(math.Round(float64(sharding.DefaultWeight*len(stable)*percent)/float64((100-percent)*len(canary))))), sharding.MaxWeight)
	}
	for _, m := range canary {
		out[m] = wc
	}
	for _, m := range stable {
		out[m] = ws
	}
	return out
}

// applyWeights writes target weights onto the members' Leases; it reports
// whether any Lease (as cached) does not announce its target yet.
func (r *Rollout) applyWeights(ctx context.Context, v view, target map[string]int) (bool, error) {
	pending := false
	for _, m := range slices.Sorted(maps.Keys(target)) {
		w := target[m]
		l := v.leases[m]
		if l == nil || v.weights[m] == w && l.Annotations[sharding.WeightAnnotation] != "" {
			continue
		}
		pending = true
		patch := client.MergeFrom(l.DeepCopy())
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Annotations[sharding.WeightAnnotation] = strconv.Itoa(w)
		if err := r.mgr.GetClient().Patch(ctx, l, patch); err != nil {
			return true, fmt.Errorf("canary: weight of member %s: %w", m, err)
		}
		log.FromContext(ctx).V(1).Info("member weight", "member", m, "weight", w)
	}
	return pending, nil
}

// observe counts the cohorts and reports whether every object is where the
// weighted ring of ready members places it, with none draining or unassigned.
func (r *Rollout) observe(ctx context.Context, st State, v view, first bool, now time.Time) (canary, stable Cohort, settled bool, why string, err error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(r.gvk.GroupVersion().WithKind(r.gvk.Kind + "List"))
	if err := r.cache.List(ctx, list); err != nil {
		return canary, stable, false, "", err
	}
	weights := make(map[string]int, len(v.ready))
	for _, m := range v.ready {
		weights[m] = v.weights[m]
	}
	ring := sharding.NewRing(v.ready, sharding.WithWeights(weights))
	shardKey, drainKey := sharding.ShardLabel(r.ring), sharding.DrainLabel(r.ring)
	canary.Version, stable.Version = st.CanaryVersion, st.StableVersion
	settled = true
	keep := make(map[client.ObjectKey]bool, len(list.Items))
	misplaced := 0
	for i := range list.Items {
		o := &list.Items[i]
		key := client.ObjectKeyFromObject(o)
		keep[key] = true
		member := o.GetLabels()[shardKey]
		if _, draining := o.GetLabels()[drainKey]; draining || member == "" {
			settled = false
			misplaced++
		} else if ring.Len() > 0 && ring.Lookup(sharding.ObjectKey(r.gvk.GroupKind(), o.GetNamespace(), o.GetName())) != member {
			settled = false
			misplaced++
		}
		ready := isReady(o)
		t := r.tracked[key]
		if t == nil || t.member != member || t.generation != o.GetGeneration() {
			arrived := !first && (t == nil || t.member != member)
			t = &tracked{member: member, generation: o.GetGeneration(), since: now, arrived: arrived}
			r.tracked[key] = t
		}
		if ready && !t.ready {
			t.ready, t.timeToReady = true, now.Sub(t.since)
		}
		if member == "" {
			continue
		}
		var c *Cohort
		switch ver := v.versions[member]; {
		case st.CanaryVersion != "" && ver == st.CanaryVersion:
			c = &canary
		case ver == st.StableVersion:
			c = &stable
		default:
			continue // on a member of another version, on its way off it
		}
		c.Objects++
		if ready {
			c.Ready++
		} else if now.Sub(t.since) > r.readyTimeout {
			c.Late++
		}
		if conditions.IsTrue(o, conditions.Stalled) {
			c.Stalled++
		}
		if conditions.IsTrue(o, conditions.Degraded) {
			c.Degraded++
		}
		if t.ready && t.arrived && !st.Started.IsZero() && !t.since.Before(st.Started) {
			c.MaxTimeToReady = max(c.MaxTimeToReady, t.timeToReady)
		}
	}
	for k := range r.tracked {
		if !keep[k] {
			delete(r.tracked, k)
		}
	}
	if misplaced > 0 {
		why = fmt.Sprintf("%d objects moving", misplaced)
	}
	return canary, stable, settled, why, nil
}

// isReady: Ready=True for the object's current generation.
func isReady(o client.Object) bool {
	s, err := conditions.StatusOf(o)
	if err != nil || !s.IsTrue(conditions.Ready) {
		return false
	}
	if og, ok := s.ObservedGeneration(); ok && og != o.GetGeneration() {
		return false
	}
	if c := s.Get(conditions.Ready); c != nil && c.ObservedGeneration != 0 && c.ObservedGeneration != o.GetGeneration() {
		return false
	}
	return true
}

// errorsSince returns version's errors since the step's baseline; last
// when they cannot be read.
func (r *Rollout) errorsSince(ctx context.Context, version string, last float64) float64 {
	if r.errorCounts == nil || version == "" {
		return 0
	}
	n, err := r.errorCounts(ctx, version)
	if err != nil {
		log.FromContext(ctx).V(1).Info("reading reconcile errors", "version", version, "error", err.Error())
		return last
	}
	b, ok := r.baseline[version]
	if !ok {
		r.baseline[version] = n
		return 0
	}
	return n - b
}

// advance moves the phase on from what this check saw.
func (r *Rollout) advance(ctx context.Context, cm *corev1.ConfigMap, st *State, settled bool, why string, now time.Time) {
	logger := log.FromContext(ctx)
	switch st.Phase {
	case PhaseProgressing:
		st.Percent = r.steps[min(st.Step, len(r.steps)-1)]
		if len(st.Canary.Members) == 0 {
			st.Verdict, st.Message = Wait, fmt.Sprintf("no ready member announces %s", st.CanaryVersion)
			return
		}
		if st.WindowStart.IsZero() {
			if !settled {
				st.Verdict, st.Message = Wait, fmt.Sprintf("moving to %d%%: %s", st.Percent, why)
				return
			}
			st.WindowStart = now
		}
		verdict, msg := r.judge(Sample{Canary: st.Canary, Stable: st.Stable, Percent: st.Percent, Elapsed: now.Sub(st.WindowStart), Window: r.window})
		st.Verdict, st.Message = verdict, msg
		switch verdict {
		case Fail:
			failedAt := st.Percent
			r.enter(st, PhaseRollingBack, now)
			st.Percent, st.Message = 0, fmt.Sprintf("failed at %d%%: %s", failedAt, msg)
			r.observer.Decided(r.ring, Fail, "")
			r.event(cm, true, "CanaryRollingBack", "rolling %s back: %s", st.CanaryVersion, st.Message)
			logger.Info("canary failed; rolling back", "canary", st.CanaryVersion, "percent", failedAt, "why", msg)
		case Pass:
			r.observer.Decided(r.ring, Pass, "")
			if st.Step >= len(r.steps)-1 {
				r.promoted(ctx, cm, st, now, msg)
				return
			}
			st.Step++
			st.Percent = r.steps[st.Step]
			st.WindowStart = time.Time{}
			clear(r.baseline) // errors count from the new step's start
			r.event(cm, false, "CanaryWidened", "%s passed; widening to %d%%", st.CanaryVersion, st.Percent)
			logger.Info("canary passed; widening", "canary", st.CanaryVersion, "percent", st.Percent)
		}
	case PhasePaused:
		st.Verdict, st.Message = Wait, fmt.Sprintf("paused at %d%%; annotate %s=%s to continue", st.Percent, ActionAnnotation, ActionResume)
	case PhasePromoting:
		st.Percent = 100
		if settled && st.Stable.Objects == 0 {
			r.promoted(ctx, cm, st, now, "promoted by "+ActionAnnotation)
			return
		}
		st.Message = fmt.Sprintf("promoting: %d objects still on %s", st.Stable.Objects, st.StableVersion)
	case PhaseRollingBack:
		st.Percent = 0
		if settled && st.Canary.Objects == 0 {
			took := now.Sub(st.Since)
			r.enter(st, PhaseRolledBack, now)
			st.Message = fmt.Sprintf("rolled %s back in %s; every object is on %s again", st.CanaryVersion, took.Round(time.Millisecond), st.StableVersion)
			r.event(cm, true, "CanaryRolledBack", "%s", st.Message)
			logger.Info("canary rolled back", "canary", st.CanaryVersion, "took", took)
		}
	}
}

func (r *Rollout) promoted(ctx context.Context, cm *corev1.ConfigMap, st *State, now time.Time, msg string) {
	took := now.Sub(st.Started)
	st.PreviousVersion, st.StableVersion, st.CanaryVersion = st.StableVersion, st.CanaryVersion, ""
	st.Percent, st.Step = 100, len(r.steps)-1
	r.enter(st, PhasePromoted, now)
	st.Message = fmt.Sprintf("%s promoted after %s: %s", st.StableVersion, took.Round(time.Millisecond), msg)
	r.event(cm, false, "CanaryPromoted", "%s", st.Message)
	log.FromContext(ctx).Info("canary promoted", "version", st.StableVersion, "took", took)
}
