package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/examples/internal/examplecmd"
	"github.com/opkit/opkit/examples/sharded/fleet"
	webappv1 "github.com/opkit/opkit/examples/webapp/api/v1"
	"github.com/opkit/opkit/examples/webapp/config"
	"github.com/opkit/opkit/sharding"
	"github.com/opkit/opkit/sharding/canary"
	"github.com/opkit/opkit/testenv"
)

// DemoNamespace holds the demo's WebApps, the ring's Leases and the rollout's ConfigMap.
const DemoNamespace = "demo"

// VersionLabel is what versions after v1 put on every child they write:
// the visible difference in a child's shape between the versions.
const VersionLabel = "apps.example.com/operator-version"

// brokenPortName is v2's mistake: a container port name longer than the 15
// characters the API server allows, so every Deployment it writes is refused
// (422) and its WebApps go Stalled.
const brokenPortName = "http-v2-metrics-port"

// labelChildren is v2.1: v1's children, labelled with the version.
func labelChildren(version string) func(*webappv1.WebApp, []client.Object) {
	return func(_ *webappv1.WebApp, children []client.Object) {
		for _, c := range children {
			l := c.GetLabels()
			l[VersionLabel] = version
			c.SetLabels(l)
		}
	}
}

// broken is v2: labelled like v2.1, and the Deployment's port misnamed.
func broken(app *webappv1.WebApp, children []client.Object) {
	labelChildren("v2")(app, children)
	for _, c := range children {
		if d, ok := c.(*appsv1.Deployment); ok {
			d.Spec.Template.Spec.Containers[0].Ports[0].Name = brokenPortName
		}
	}
}

func newScheme() (*runtime.Scheme, error) { return examplecmd.NewScheme(webappv1.AddToScheme) }

// result is what the demo measured.
type result struct {
	failedAt        string        // the rollout's message when v2 failed
	canaryErrors    float64       // most reconcile errors of v2 the rollout reported
	verdictAfter    time.Duration // v2 joined → Fail verdict
	rolledBackAfter time.Duration // verdict → no WebApp on v2 (phase RolledBack)
	restoredAfter   time.Duration // verdict → every WebApp Ready on v1 with v1's children
	promotedAfter   time.Duration // v2.1 joined → Promoted
	stepsSeen       []int         // shares v2.1 held on the way
	maxConcurrent   int
	reconciles      int
}

// run starts the embedded control plane and runs the demo on it.
func run(ctx context.Context, o options) (*result, error) {
	closeLog, err := narrator.SetDemoLogger(o.verbose, o.logFile, o.zap)
	if err != nil {
		return nil, err
	}
	defer closeLog()
	scheme, err := newScheme()
	if err != nil {
		return nil, err
	}
	crds, err := config.CRDs()
	if err != nil {
		return nil, err
	}
	env, stop, err := narrator.StartControlPlane("kube-apiserver, etcd, controller-manager, scheduler, kwok node",
		testenv.WithWorkloads(), testenv.WithCRDs(crds...), testenv.WithScheme(scheme), testenv.WithBuildIfMissing())
	if err != nil {
		return nil, err
	}
	defer stop()
	kubectl, err := narrator.Kubectl(ctx, env)
	if err != nil {
		return nil, err
	}
	return demo(ctx, env.Config, env.Client, scheme, o, DemoNamespace, kubectl)
}

// demo runs both rollouts in ns against cfg.
func demo(ctx context.Context, cfg *rest.Config, c client.Client, scheme *runtime.Scheme, o options, ns, kubectl string) (*result, error) {
	if o.exitWhenReady {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	if err := examplecmd.EnsureNamespace(ctx, c, ns); err != nil {
		return nil, err
	}
	errs := &reconcileErrors{}
	rollout := []canary.Option{canary.WithSteps(o.steps...), canary.WithWindow(o.window), canary.WithInterval(250 * time.Millisecond),
		canary.WithErrorCounts(errs.count)}
	fl, err := fleet.NewFleet(cfg, fleet.Options{Ring: fleet.DefaultRing, Namespace: ns, Replicas: o.replicas,
		LeaseDuration: o.leaseDuration, Scheme: scheme, Version: "v1", Rollout: rollout})
	if err != nil {
		return nil, err
	}
	errs.add(fl.Replicas...)
	fl.Start(ctx)
	defer func() { _ = fl.Stop() }()
	say("started %d replicas of the webapp operator, version v1 (ring %q; the rollout runs on the elected replica, steps %v%%, window %s)",
		o.replicas, fl.Ring, o.steps, o.window)
	if err := poll(ctx, fl, func() (bool, string, error) {
		ms, err := fleet.Members(ctx, c, fl.Ring, ns)
		held := 0
		for _, m := range ms {
			if m.Holder != "" {
				held++
			}
		}
		return held == o.replicas, "member Leases", err
	}); err != nil {
		return nil, fmt.Errorf("waiting for the member Leases: %w", err)
	}
	names, err := applyWebApps(ctx, c, ns, o.webapps)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	say("applied %d WebApps in namespace %s (%s … %s)", len(names), ns, names[0], names[len(names)-1])
	stable := fl.Running()
	if err := waitFleet(ctx, c, fl, ns, stable, ""); err != nil {
		return nil, fmt.Errorf("waiting for the WebApps on v1: %w", err)
	}
	before, err := readChildren(ctx, c, ns)
	if err != nil {
		return nil, err
	}
	say("all %d WebApps Ready on v1 in %.1fs; %d children", len(names), time.Since(t0).Seconds(), before.count())
	if err := printState(ctx, c, fl.Ring, ns, kubectl); err != nil {
		return nil, err
	}
	res := &result{}

	// v2: broken. It joins with weight 0 and gets the first step's share.
	say("adding replica canary-v2 (version v2: names the Deployment's port %q, which the API server refuses)", brokenPortName)
	start := time.Now()
	bad, err := fl.Add(ctx, cfg, scheme, fleet.ReplicaOptions{Member: "canary-v2", Version: "v2", Weight: ptr.To(0),
		MutateChildren: broken, ReleaseOnStop: true, Rollout: rollout})
	if err != nil {
		return nil, err
	}
	errs.add(bad)
	var verdict time.Time
	if err := follow(ctx, c, fl, ns, func(st canary.State) bool {
		if st.CanaryVersion == "v2" {
			res.canaryErrors = max(res.canaryErrors, st.Canary.Errors)
		}
		if st.Phase == canary.PhaseRollingBack && verdict.IsZero() {
			verdict = time.Now()
			res.failedAt = st.Message
		}
		return st.Phase == canary.PhaseRolledBack && st.CanaryVersion == "v2"
	}, start); err != nil {
		return nil, fmt.Errorf("waiting for v2 to be rolled back: %w", err)
	}
	if verdict.IsZero() {
		return nil, errors.New("v2 rolled back without a verdict")
	}
	res.verdictAfter, res.rolledBackAfter = verdict.Sub(start), time.Since(verdict)
	if err := waitFleet(ctx, c, fl, ns, stable, ""); err != nil {
		return nil, fmt.Errorf("waiting for every WebApp back on v1: %w", err)
	}
	res.restoredAfter = time.Since(verdict)
	if err := sameChildren(ctx, c, ns, before, ""); err != nil {
		return nil, err
	}
	say("v2 failed %.1fs after it joined (%s); rolled back in %.1fs; every WebApp Ready on v1, children in v1's shape (the same %d objects) %.1fs after the verdict",
		res.verdictAfter.Seconds(), res.failedAt, res.rolledBackAfter.Seconds(), before.count(), res.restoredAfter.Seconds())
	if err := bad.Stop(); err != nil {
		return nil, fmt.Errorf("stopping canary-v2: %w", err)
	}

	// v2.1: good. Widened step by step, then promoted.
	say("adding replica canary-v2-1 (version v2.1: labels the children %s=v2.1, nothing else)", VersionLabel)
	start = time.Now()
	good, err := fl.Add(ctx, cfg, scheme, fleet.ReplicaOptions{Member: "canary-v2-1", Version: "v2.1", Weight: ptr.To(0),
		MutateChildren: labelChildren("v2.1"), ReleaseOnStop: true, Rollout: rollout})
	if err != nil {
		return nil, err
	}
	errs.add(good)
	if err := follow(ctx, c, fl, ns, func(st canary.State) bool {
		if st.Phase == canary.PhaseProgressing && st.CanaryVersion == "v2.1" && !slices.Contains(res.stepsSeen, st.Percent) {
			res.stepsSeen = append(res.stepsSeen, st.Percent)
		}
		return st.Phase == canary.PhasePromoted && st.StableVersion == "v2.1"
	}, start); err != nil {
		return nil, fmt.Errorf("waiting for v2.1 to be promoted: %w", err)
	}
	res.promotedAfter = time.Since(start)
	if err := waitFleet(ctx, c, fl, ns, []string{"canary-v2-1"}, "v2.1"); err != nil {
		return nil, fmt.Errorf("waiting for every WebApp on v2.1: %w", err)
	}
	if err := sameChildren(ctx, c, ns, before, "v2.1"); err != nil {
		return nil, err
	}
	say("v2.1 promoted %.1fs after it joined, through %v%%; every WebApp Ready on canary-v2-1, children labelled v2.1 (the same %d objects)",
		res.promotedAfter.Seconds(), res.stepsSeen, before.count())
	if err := printState(ctx, c, fl.Ring, ns, kubectl); err != nil {
		return nil, err
	}
	maxN, worst := fl.Detector.Max()
	res.maxConcurrent, res.reconciles = maxN, fl.Detector.Reconciles()
	say("reconciles: %d; most replicas (of any version) inside Reconcile for one WebApp at once: %d; assigner: %s", res.reconciles, maxN, fl.Moves)
	if err := fl.Err(); err != nil {
		return res, err
	}
	if maxN > 1 {
		return res, fmt.Errorf("two replicas reconciled %s at once", worst)
	}
	if o.exitWhenReady {
		say("both rollouts done; exiting as asked")
		return res, nil
	}
	say("running until Ctrl-C; try a rollout by hand: kubectl annotate configmap %s -n %s %s=pause|resume|promote|abort",
		canary.StateName(fl.Ring), ns, canary.ActionAnnotation)
	<-ctx.Done()
	return res, ctx.Err()
}

// follow prints the rollout's state whenever its phase or share changes,
// until done holds for it.
func follow(ctx context.Context, c client.Client, fl *fleet.Fleet, ns string, done func(canary.State) bool, start time.Time) error {
	last := ""
	return poll(ctx, fl, func() (bool, string, error) {
		st, err := canary.Get(ctx, c, fl.Ring, ns)
		if err != nil {
			return false, "", err
		}
		line := fmt.Sprintf("%-11s %3d%%  canary %-4s %4d WebApps (%d unhealthy, %.0f reconcile errors)  stable %-4s %4d WebApps", st.Phase, st.Percent,
			st.CanaryVersion, st.Canary.Objects, st.Canary.Stalled, st.Canary.Errors, st.StableVersion, st.Stable.Objects)
		if key := string(st.Phase) + fmt.Sprint(st.Percent); key != last {
			last = key
			fmt.Printf("  +%5.1fs  %s\n", time.Since(start).Seconds(), line)
		}
		return done(st), line + ": " + st.Message, nil
	})
}

// poll checks cond every 100ms until it holds, ctx ends or a replica failed.
func poll(ctx context.Context, fl *fleet.Fleet, cond func() (bool, string, error)) error {
	var why string
	var last error
	for {
		if err := fl.Err(); err != nil {
			return err
		}
		ok, msg, err := cond()
		if ok {
			return nil
		}
		why = msg
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %s)", errors.Join(ctx.Err(), last), why)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitFleet waits until every WebApp is on one of members, none draining,
// all Ready, and every child labelled with version ("" for none).
func waitFleet(ctx context.Context, c client.Client, fl *fleet.Fleet, ns string, members []string, version string) error {
	return poll(ctx, fl, func() (bool, string, error) {
		s, err := fleet.Read(ctx, c, fl.Ring, ns)
		if err != nil {
			return false, "", err
		}
		for _, app := range s.Apps {
			if m := s.Owner[app.Name]; !slices.Contains(members, m) {
				return false, fmt.Sprintf("%s is on %q", app.Name, m), nil
			}
		}
		if len(s.Draining) > 0 || len(s.NotReady) > 0 {
			return false, fmt.Sprintf("draining %v, not Ready %v", s.Draining, s.NotReady), nil
		}
		ch, err := readChildren(ctx, c, ns)
		if err != nil {
			return false, "", err
		}
		for key, v := range ch.version {
			if v != version {
				return false, fmt.Sprintf("%s is labelled %q, want %q", key, v, version), nil
			}
		}
		return true, "", nil
	})
}

// children are the WebApps' children as the API server has them.
type children struct {
	uid     map[string]string // "<Kind>/<WebApp>" → UID
	version map[string]string // "<Kind>/<WebApp>" → VersionLabel
	ports   map[string]string // WebApp → the Deployment's first port name
	extra   []string          // a second child of one kind for one WebApp
}

func (ch children) count() int { return len(ch.uid) }

func readChildren(ctx context.Context, c client.Client, ns string) (children, error) {
	ch := children{uid: map[string]string{}, version: map[string]string{}, ports: map[string]string{}}
	add := func(kind string, o client.Object) {
		ref := metav1.GetControllerOf(o)
		if ref == nil || ref.Kind != "WebApp" {
			return
		}
		key := kind + "/" + ref.Name
		if _, dup := ch.uid[key]; dup {
			ch.extra = append(ch.extra, key)
		}
		ch.uid[key], ch.version[key] = string(o.GetUID()), o.GetLabels()[VersionLabel]
	}
	var cms corev1.ConfigMapList
	var deps appsv1.DeploymentList
	var svcs corev1.ServiceList
	for _, l := range []client.ObjectList{&cms, &deps, &svcs} {
		if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
			return ch, err
		}
	}
	for i := range cms.Items {
		add("ConfigMap", &cms.Items[i])
	}
	for i := range deps.Items {
		d := &deps.Items[i]
		add("Deployment", d)
		if ref := metav1.GetControllerOf(d); ref != nil {
			ch.ports[ref.Name] = d.Spec.Template.Spec.Containers[0].Ports[0].Name
		}
	}
	for i := range svcs.Items {
		add("Service", &svcs.Items[i])
	}
	return ch, nil
}

// sameChildren checks that the children are exactly the ones of before (none
// lost, none re-created, none duplicated), labelled with version, and that
// no Deployment carries v2's port name.
func sameChildren(ctx context.Context, c client.Client, ns string, before children, version string) error {
	now, err := readChildren(ctx, c, ns)
	if err != nil {
		return err
	}
	var errs []string
	if len(now.extra) > 0 {
		errs = append(errs, fmt.Sprintf("duplicated children: %v", now.extra))
	}
	for key, uid := range before.uid {
		switch got, ok := now.uid[key]; {
		case !ok:
			errs = append(errs, key+" lost")
		case got != uid:
			errs = append(errs, key+" re-created")
		case now.version[key] != version:
			errs = append(errs, fmt.Sprintf("%s labelled %q, want %q", key, now.version[key], version))
		}
	}
	if len(now.uid) != len(before.uid) {
		errs = append(errs, fmt.Sprintf("%d children, were %d", len(now.uid), len(before.uid)))
	}
	for app, p := range now.ports {
		if p != "http" {
			errs = append(errs, fmt.Sprintf("Deployment %s has port %q", app, p))
		}
	}
	if len(errs) > 0 {
		slices.Sort(errs)
		return fmt.Errorf("children: %s", strings.Join(errs[:min(len(errs), 10)], "; "))
	}
	return nil
}

// applyWebApps creates n WebApps named after the webapp example's samples,
// with their specs: hello-00, docs-01, hello-02, …
func applyWebApps(ctx context.Context, c client.Client, ns string, n int) ([]string, error) {
	samples, err := config.Samples()
	if err != nil {
		return nil, err
	}
	if len(samples) == 0 || n < 1 {
		return nil, errors.New("nothing to apply")
	}
	var names []string
	for i := range n {
		app := &webappv1.WebApp{}
		s := samples[i%len(samples)]
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(s.Object, app); err != nil {
			return nil, fmt.Errorf("sample %s: %w", s.GetName(), err)
		}
		app.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%02d", s.GetName(), i)}
		if err := c.Create(ctx, app); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("apply WebApp %s/%s: %w", ns, app.Name, err)
		}
		names = append(names, app.Name)
	}
	return names, nil
}

// printState prints the rollout's ConfigMap and the members' versions and
// weights, the way kubectl shows them.
func printState(ctx context.Context, c client.Client, ring, ns, kubectl string) error {
	st, err := canary.Get(ctx, c, ring, ns)
	if err != nil {
		return err
	}
	say("rollout state:  %s get configmap %s -n %s -o yaml", kubectl, canary.StateName(ring), ns)
	fmt.Printf("  phase=%s stableVersion=%s canaryVersion=%s percent=%d verdict=%s\n  message: %s\n",
		st.Phase, st.StableVersion, st.CanaryVersion, st.Percent, st.Verdict, st.Message)
	say("members:  %s get leases -n %s -l %s=%s -o custom-columns='MEMBER:.metadata.labels.ring\\.shard\\.opkit\\.dev/member,VERSION:.metadata.annotations.ring\\.shard\\.opkit\\.dev/version,WEIGHT:.metadata.annotations.ring\\.shard\\.opkit\\.dev/weight'",
		kubectl, ns, sharding.RingLabel, ring)
	var leases coordinationv1.LeaseList
	if err := c.List(ctx, &leases, client.InNamespace(ns), client.MatchingLabels{sharding.RingLabel: ring}); err != nil {
		return err
	}
	slices.SortFunc(leases.Items, func(a, b coordinationv1.Lease) int {
		return strings.Compare(a.Labels[sharding.MemberLabel], b.Labels[sharding.MemberLabel])
	})
	for i := range leases.Items {
		l := &leases.Items[i]
		fmt.Printf("  %-12s version %-5s weight %3d  holder %q\n", l.Labels[sharding.MemberLabel], sharding.LeaseVersion(l), sharding.LeaseWeight(l), ptr.Deref(l.Spec.HolderIdentity, ""))
	}
	return nil
}

func say(format string, args ...any) { narrator.Say(format, args...) }
