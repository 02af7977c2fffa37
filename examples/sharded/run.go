package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/examples/internal/examplecmd"
	"github.com/opkit/opkit/examples/sharded/fleet"
	webappv1 "github.com/opkit/opkit/examples/webapp/api/v1"
	"github.com/opkit/opkit/examples/webapp/config"
	"github.com/opkit/opkit/sharding"
	"github.com/opkit/opkit/testenv"
)

// DemoNamespace holds the demo's WebApps and the ring's Leases.
const DemoNamespace = "demo"

func newScheme() (*runtime.Scheme, error) { return examplecmd.NewScheme(webappv1.AddToScheme) }

// run starts the embedded control plane and runs the demo on it.
func run(ctx context.Context, o options) error {
	// The demo's progress owns stdout; the replicas' logs go to a file (-v: stderr).
	closeLog, err := narrator.SetDemoLogger(o.verbose, o.logFile, o.zap)
	if err != nil {
		return err
	}
	defer closeLog()
	scheme, err := newScheme()
	if err != nil {
		return err
	}
	crds, err := config.CRDs()
	if err != nil {
		return err
	}
	env, stop, err := narrator.StartControlPlane("kube-apiserver, etcd, controller-manager, scheduler, kwok node",
		testenv.WithWorkloads(), testenv.WithCRDs(crds...), testenv.WithScheme(scheme), testenv.WithBuildIfMissing())
	if err != nil {
		return err
	}
	defer stop()
	kubectl, err := narrator.Kubectl(ctx, env)
	if err != nil {
		return err
	}
	_, err = demo(ctx, env.Config, env.Client, scheme, o, DemoNamespace, kubectl)
	return err
}

// result is what the demo measured.
type result struct {
	victim        string
	moved         map[string][2]string // WebApp → {from, to}
	movedAfter    time.Duration        // kill → last label moved
	readyAfter    time.Duration        // kill → every WebApp Ready and the moved ones reconciled by their new replica
	notReadySeen  []string             // WebApps seen not Ready during the hand-over
	maxConcurrent int
	reconciles    int
}

// demo runs the fleet in ns against cfg: apply, spread, Ready, kill, hand-over.
func demo(ctx context.Context, cfg *rest.Config, c client.Client, scheme *runtime.Scheme, o options, ns, kubectl string) (*result, error) {
	if o.exitWhenReady {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	if err := examplecmd.EnsureNamespace(ctx, c, ns); err != nil {
		return nil, err
	}
	fl, err := fleet.NewFleet(cfg, fleet.Options{Ring: fleet.DefaultRing, Namespace: ns, Replicas: o.replicas, LeaseDuration: o.leaseDuration, Scheme: scheme, Hold: o.hold})
	if err != nil {
		return nil, err
	}
	fl.Start(ctx)
	defer func() { _ = fl.Stop() }()
	say("started %d replicas of the webapp operator in this process (ring %q, member Lease %s: a crashed replica's WebApps move after %s)",
		o.replicas, fl.Ring, o.leaseDuration, 2*o.leaseDuration)

	// Wait for every member Lease so the first assignment is already the final one.
	all := fl.Running()
	if err := poll(ctx, fl, func() (bool, error) {
		ms, err := fleet.Members(ctx, c, fl.Ring, ns)
		held := 0
		for _, m := range ms {
			if m.Holder != "" {
				held++
			}
		}
		return held == len(all), err
	}); err != nil {
		return nil, fmt.Errorf("waiting for the member Leases: %w", err)
	}
	names, err := applyWebApps(ctx, c, ns, o.webapps)
	if err != nil {
		return nil, err
	}
	say("applied %d WebApps in namespace %s (%s … %s)", len(names), ns, names[0], names[len(names)-1])

	t0 := time.Now()
	snap, err := waitSettled(ctx, c, fl, ns, all)
	if err != nil {
		return nil, fmt.Errorf("waiting for the assignment: %w", err)
	}
	leader := "none yet"
	if l := fl.Leader(); l != nil {
		leader = l.Member
	}
	say("assigned in %.1fs by the assigner on %s; who owns what (label %s):", time.Since(t0).Seconds(), leader, sharding.ShardLabel(fl.Ring))
	printAssignment(os.Stdout, snap, all)
	if err := printMembers(ctx, c, fl.Ring, ns, kubectl); err != nil {
		return nil, err
	}

	snap, err = waitReady(ctx, c, fl, ns)
	if err != nil {
		return nil, fmt.Errorf("waiting for every WebApp to be Ready: %w", err)
	}
	say("all %d WebApps Ready %.1fs after they were applied", len(snap.Apps), time.Since(t0).Seconds())

	res := &result{}
	victim := pickVictim(o.kill, fl, snap)
	if victim == nil {
		say("no replica killed (--kill=%s)", o.kill)
		return res, finish(ctx, fl, o, res)
	}
	res.victim = victim.Member
	ofVictim := snap.ByMember()[victim.Member]
	role := "not the assigner leader"
	if victim.Elected() {
		role = "the assigner leader: a survivor is elected first, and judges the Leases afresh"
	}
	say("killing %s (%d WebApps; %s): its manager stops, its member Lease is NOT released", victim.Member, len(ofVictim), role)
	kill := time.Now()
	if err := victim.Stop(); err != nil {
		return nil, fmt.Errorf("stopping %s: %w", victim.Member, err)
	}
	survivors := fl.Running()

	seenNotReady := map[string]bool{}
	snap, err = pollSnap(ctx, c, fl, ns, func(s fleet.Snapshot) bool {
		for _, n := range s.NotReady {
			seenNotReady[n] = true
		}
		ok, _ := s.Settled(ns, survivors)
		return ok
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for the hand-over: %w", err)
	}
	res.movedAfter = time.Since(kill)
	res.moved = map[string][2]string{}
	for _, name := range ofVictim {
		res.moved[name] = [2]string{victim.Member, snap.Owner[name]}
	}
	say("hand-over: %d WebApps moved off %s %.1fs after the kill (its Lease was dead after %s without renewal):",
		len(ofVictim), victim.Member, res.movedAfter.Seconds(), 2*o.leaseDuration)
	for _, name := range ofVictim {
		fmt.Printf("  %-10s %s → %s\n", name, victim.Member, snap.Owner[name])
	}

	// Ready again, and each moved WebApp reconciled by its new replica.
	var pending []string
	snap, err = pollSnap(ctx, c, fl, ns, func(s fleet.Snapshot) bool {
		for _, n := range s.NotReady {
			seenNotReady[n] = true
		}
		if len(s.NotReady) > 0 {
			return false
		}
		pending = pending[:0]
		for _, name := range ofVictim {
			if !reconciledBy(fl.Detector.Visits(types.NamespacedName{Namespace: ns, Name: name}), s.Owner[name], kill) {
				pending = append(pending, name)
			}
		}
		return len(pending) == 0
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for the moved WebApps to be reconciled by their new replicas (not yet: %v): %w", pending, err)
	}
	res.readyAfter = time.Since(kill)
	for n := range seenNotReady {
		res.notReadySeen = append(res.notReadySeen, n)
	}
	slices.Sort(res.notReadySeen)
	throughout := "Ready=True throughout on every WebApp"
	if len(res.notReadySeen) > 0 {
		throughout = fmt.Sprintf("seen not Ready meanwhile: %v", res.notReadySeen)
	}
	say("all %d WebApps Ready, the moved ones reconciled by their new replica, %.1fs after the kill; %s",
		len(snap.Apps), res.readyAfter.Seconds(), throughout)
	printAssignment(os.Stdout, snap, survivors)
	if err := printMembers(ctx, c, fl.Ring, ns, kubectl); err != nil {
		return nil, err
	}
	return res, finish(ctx, fl, o, res)
}

// finish reports the overlap detector's verdict and, unless bounded, keeps the
// survivors running until ctx ends.
func finish(ctx context.Context, fl *fleet.Fleet, o options, res *result) error {
	maxN, worst := fl.Detector.Max()
	res.maxConcurrent, res.reconciles = maxN, fl.Detector.Reconciles()
	say("reconciles: %d; most replicas inside Reconcile for one WebApp at once: %d; assigner: %s", res.reconciles, maxN, fl.Moves)
	if err := fl.Err(); err != nil {
		return err
	}
	if maxN > 1 {
		return fmt.Errorf("two replicas reconciled %s at once", worst)
	}
	if o.exitWhenReady && len(res.notReadySeen) > 0 {
		return fmt.Errorf("WebApps were not Ready during the hand-over: %v", res.notReadySeen)
	}
	if o.exitWhenReady {
		say("hand-over complete; exiting as asked")
		return nil
	}
	say("running until Ctrl-C; edit or add WebApps in namespace %s and watch who reconciles them", fl.Namespace)
	<-ctx.Done()
	return ctx.Err()
}

func reconciledBy(visits []fleet.Visit, member string, after time.Time) bool {
	for _, v := range visits {
		if v.Member == member && v.At.After(after) {
			return true
		}
	}
	return false
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

func pickVictim(kill string, fl *fleet.Fleet, snap fleet.Snapshot) *fleet.Replica {
	switch kill {
	case "none", "":
		return nil
	case "leader":
		return fl.Leader()
	case "auto":
		by := snap.ByMember()
		var best *fleet.Replica
		for _, r := range fl.Replicas {
			if r.Running() && !r.Elected() && (best == nil || len(by[r.Member]) > len(by[best.Member])) {
				best = r
			}
		}
		return best
	}
	if r := fl.Replica(kill); r != nil && r.Running() {
		return r
	}
	return nil
}

// poll checks cond every 100ms until it holds, ctx ends or a replica failed.
func poll(ctx context.Context, fl *fleet.Fleet, cond func() (bool, error)) error {
	var last error
	for {
		if err := fl.Err(); err != nil {
			return err
		}
		ok, err := cond()
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// pollSnap reads the namespace every 100ms until cond holds for a snapshot.
func pollSnap(ctx context.Context, c client.Client, fl *fleet.Fleet, ns string, cond func(fleet.Snapshot) bool) (fleet.Snapshot, error) {
	var snap fleet.Snapshot
	var why error
	err := poll(ctx, fl, func() (bool, error) {
		s, err := fleet.Read(ctx, c, fl.Ring, ns)
		if err != nil {
			return false, err // the API may be busy; poll looks again
		}
		snap = s
		if ok := cond(s); !ok {
			why = fmt.Errorf("last: not Ready %v, draining %v", s.NotReady, s.Draining)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return snap, errors.Join(err, why)
	}
	return snap, nil
}

func waitSettled(ctx context.Context, c client.Client, fl *fleet.Fleet, ns string, members []string) (fleet.Snapshot, error) {
	var why string
	snap, err := pollSnap(ctx, c, fl, ns, func(s fleet.Snapshot) bool {
		ok, msg := s.Settled(ns, members)
		why = msg
		return ok
	})
	if err != nil {
		return snap, fmt.Errorf("%w (%s)", err, why)
	}
	return snap, nil
}

func waitReady(ctx context.Context, c client.Client, fl *fleet.Fleet, ns string) (fleet.Snapshot, error) {
	last := ""
	return pollSnap(ctx, c, fl, ns, func(s fleet.Snapshot) bool {
		line := fmt.Sprintf("%d of %d WebApps Ready", len(s.Apps)-len(s.NotReady), len(s.Apps))
		if line != last {
			fmt.Println("  " + line)
			last = line
		}
		return len(s.NotReady) == 0
	})
}

func printAssignment(w io.Writer, s fleet.Snapshot, members []string) {
	by := s.ByMember()
	for _, m := range members {
		fmt.Fprintf(w, "  %-10s %2d WebApps: %s\n", m, len(by[m]), strings.Join(by[m], " "))
	}
	if un := by[""]; len(un) > 0 {
		fmt.Fprintf(w, "  %-10s %2d WebApps: %s\n", "unassigned", len(un), strings.Join(un, " "))
	}
}

func printMembers(ctx context.Context, c client.Client, ring, ns, kubectl string) error {
	ms, err := fleet.Members(ctx, c, ring, ns)
	if err != nil {
		return err
	}
	say("member Leases:  %s get leases -n %s -l %s=%s", kubectl, ns, sharding.RingLabel, ring)
	for _, m := range ms {
		fmt.Printf("  %-10s holder %-20s renewed %.1fs ago\n", m.Name, m.Holder, m.Renewed.Seconds())
	}
	return nil
}

func say(format string, args ...any) { narrator.Say(format, args...) }
