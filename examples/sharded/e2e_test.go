package main

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/opkit/opkit/examples/internal/e2etest"
	"github.com/opkit/opkit/examples/sharded/fleet"
	webappv1 "github.com/opkit/opkit/examples/webapp/api/v1"
	"github.com/opkit/opkit/examples/webapp/config"
	"github.com/opkit/opkit/observability"
	"github.com/opkit/opkit/sharding"
	"github.com/opkit/opkit/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	// SHARDED_TEST_LOGS=1 shows the replicas' logs.
	if os.Getenv("SHARDED_TEST_LOGS") == "1" {
		logf.SetLogger(observability.NewLogger(observability.WithLogDevelopment(true), observability.WithLogOutput(os.Stderr)))
	} else {
		logf.SetLogger(logr.Discard())
	}
	scheme := e2etest.Must(newScheme())
	crds := e2etest.Must(config.CRDs())
	os.Exit(testenv.RunMain(m, &env, testenv.WithWorkloads(), testenv.WithCRDs(crds...), testenv.WithScheme(scheme)))
}

// fixedNamespace creates a namespace with exactly this name, so the WebApps'
// ring keys, and therefore the spread, are the same on every run.
func fixedNamespace(t *testing.T, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := env.Client.Create(e2etest.Context(t, 30*time.Second), ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ns) })
	return name
}

// waitSnap polls the namespace until cond holds; check runs on every
// snapshot first (to assert invariants throughout). It returns the last
// snapshot and how long it took.
func waitSnap(t *testing.T, f *fleet.Fleet, timeout time.Duration, what string, check func(fleet.Snapshot), cond func(fleet.Snapshot) (bool, string)) (fleet.Snapshot, time.Duration) {
	t.Helper()
	ctx := e2etest.Context(t, timeout+30*time.Second)
	start := time.Now()
	last := ""
	for time.Since(start) < timeout {
		if err := f.Err(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		s, err := fleet.Read(ctx, env.Client, f.Ring, f.Namespace)
		if err == nil {
			if check != nil {
				check(s)
			}
			ok, msg := cond(s)
			if ok {
				return s, time.Since(start)
			}
			last = msg
		} else {
			last = err.Error()
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: not true after %s: %s", what, timeout, last)
	return fleet.Snapshot{}, 0
}

func allReady(s fleet.Snapshot) (bool, string) {
	if len(s.NotReady) > 0 {
		return false, "not Ready: " + strings.Join(s.NotReady, " ")
	}
	return len(s.Apps) > 0, "no WebApps"
}

// TestShardedFleet runs three replicas on the real control plane in
// workloads mode: the WebApps are spread over all of them and become Ready;
// a replica killed without releasing its Lease hands its WebApps to the
// survivors within the lease bound while every WebApp stays Ready; a spec
// change on a moved WebApp is reconciled by its new replica only; then the
// replica running the assigner is killed too and the last one takes over
// everything. No two replicas are ever inside Reconcile for the same WebApp.
func TestShardedFleet(t *testing.T) {
	const lease = 2 * time.Second
	ns := fixedNamespace(t, "sharded-e2e")
	ctx := e2etest.Context(t, 3*time.Minute)
	f, err := fleet.NewFleet(env.Config, fleet.Options{Ring: fleet.DefaultRing, Namespace: ns, Replicas: 3, LeaseDuration: lease, Scheme: env.Scheme, Hold: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	f.Start(ctx)
	t.Cleanup(func() {
		if err := f.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	all := f.Running()
	waitSnap(t, f, 30*time.Second, "member Leases held", nil, func(fleet.Snapshot) (bool, string) {
		ms, err := fleet.Members(ctx, env.Client, f.Ring, ns)
		if err != nil {
			return false, err.Error()
		}
		held := 0
		for _, m := range ms {
			if m.Holder != "" {
				held++
			}
		}
		return held == len(all), "member Leases held: " + strings.Repeat("+", held)
	})
	names, err := applyWebApps(ctx, env.Client, ns, 12)
	if err != nil {
		t.Fatal(err)
	}

	// Spread over every replica, each WebApp on the member the ring places it.
	snap, took := waitSnap(t, f, time.Minute, "assignment over three replicas", nil, func(s fleet.Snapshot) (bool, string) {
		if len(s.Apps) != len(names) {
			return false, "WebApps listed: " + strings.Repeat("+", len(s.Apps))
		}
		return s.Settled(ns, all)
	})
	by := snap.ByMember()
	for _, m := range all {
		t.Logf("%s owns %d WebApps: %v", m, len(by[m]), by[m])
		if len(by[m]) == 0 {
			t.Errorf("%s got no WebApp", m)
		}
	}
	t.Logf("12 WebApps assigned in %s", took.Round(time.Millisecond))

	snap, took = waitSnap(t, f, 90*time.Second, "every WebApp Ready", nil, allReady)
	t.Logf("every WebApp Ready %s after the assignment", took.Round(time.Millisecond))
	checkChildren(ctx, t, ns, snap)

	out, err := env.Kubectl(ctx, "get", "leases", "-n", ns, "-l", sharding.RingLabel+"="+f.Ring,
		"-o", `custom-columns=MEMBER:.metadata.labels.ring\.shard\.opkit\.dev/member,HOLDER:.spec.holderIdentity`, "--no-headers")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range all {
		if !strings.Contains(out, m+" ") {
			t.Errorf("kubectl get leases -l %s=%s does not list %s:\n%s", sharding.RingLabel, f.Ring, m, out)
		}
	}

	// Crash of a replica that does not run the assigner.
	victim := pickVictim("auto", f, snap)
	if victim == nil {
		t.Fatal("no non-leader replica to kill")
	}
	moved := handOver(ctx, t, f, victim, snap, 2*lease)

	// A spec change on a moved WebApp is reconciled by its new replica, and by no other.
	var name string
	for n := range moved {
		if name == "" || n < name {
			name = n
		}
	}
	key := types.NamespacedName{Namespace: ns, Name: name}
	app := &webappv1.WebApp{}
	if err := env.Client.Get(ctx, key, app); err != nil {
		t.Fatal(err)
	}
	app.Spec.Replicas = ptr.To[int32](2)
	app.Spec.Config = map[string]string{"index.html": "<h1>moved</h1>"}
	if err := env.Client.Update(ctx, app); err != nil {
		t.Fatal(err)
	}
	gen := app.Generation
	waitSnap(t, f, time.Minute, "moved WebApp Ready for its new generation", nil, func(s fleet.Snapshot) (bool, string) {
		for _, a := range s.Apps {
			if a.Name == name {
				return a.Generation == gen && fleet.Ready(&a) && a.Status.ReadyReplicas == 2,
					"generation " + a.Status.Phase
			}
		}
		return false, "gone"
	})
	newOwner := moved[name]
	var byNew int
	for _, v := range f.Detector.Visits(key) {
		if v.Generation < gen {
			continue
		}
		if v.Member != newOwner {
			t.Errorf("generation %d of %s was reconciled by %s, not by its new replica %s", v.Generation, name, v.Member, newOwner)
		}
		byNew++
	}
	if byNew == 0 {
		t.Errorf("no reconcile of generation %d of %s recorded", gen, name)
	}
	var dep appsv1.Deployment
	if err := env.Client.Get(ctx, key, &dep); err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(dep.Spec.Replicas, 0) != 2 || dep.Labels[sharding.ShardLabel(f.Ring)] != newOwner {
		t.Errorf("Deployment %s: replicas %d, shard label %q; want 2 and %s", name, ptr.Deref(dep.Spec.Replicas, 0), dep.Labels[sharding.ShardLabel(f.Ring)], newOwner)
	}
	t.Logf("spec change on moved WebApp %s reconciled by %s only (%d reconciles of generation %d)", name, newOwner, byNew, gen)

	// Crash of the replica running the assigner: a survivor must be elected
	// first, and it judges the Leases from the moment it started watching them.
	leader := f.Leader()
	if leader == nil {
		t.Fatal("no replica runs the assigner")
	}
	snap, _ = waitSnap(t, f, 30*time.Second, "steady", nil, allReady)
	// Bound: the assigner's leader Lease (2s), then two member lease
	// durations from when the new assigner starts watching, plus its start-up.
	handOver(ctx, t, f, leader, snap, 2*time.Second+2*lease+3*time.Second)

	if n, worst := f.Detector.Max(); n != 1 {
		t.Errorf("%d replicas were inside Reconcile at once for %s", n, worst)
	}
	t.Logf("reconciles: %d; most replicas inside Reconcile for one WebApp at once: 1; assigner: %s", f.Detector.Reconciles(), f.Moves)
}

// handOver kills victim without releasing its Lease and checks that its
// WebApps move to the survivors within bound (plus scheduling slack), that
// every WebApp stays Ready meanwhile, and that each moved WebApp is reconciled
// by its new replica. It returns moved WebApp → new member.
func handOver(ctx context.Context, t *testing.T, f *fleet.Fleet, victim *fleet.Replica, before fleet.Snapshot, bound time.Duration) map[string]string {
	t.Helper()
	ns := f.Namespace
	ofVictim := before.ByMember()[victim.Member]
	if len(ofVictim) == 0 {
		t.Fatalf("%s owns nothing to hand over", victim.Member)
	}
	leader := victim.Elected()
	kill := time.Now()
	if err := victim.Stop(); err != nil {
		t.Fatalf("stop %s: %v", victim.Member, err)
	}
	survivors := f.Running()
	stayReady := func(s fleet.Snapshot) {
		for _, n := range s.NotReady {
			t.Errorf("%s was not Ready during the hand-over (%.1fs after the kill)", n, time.Since(kill).Seconds())
		}
	}
	snap, _ := waitSnap(t, f, bound+30*time.Second, "hand-over to "+strings.Join(survivors, ","), stayReady,
		func(s fleet.Snapshot) (bool, string) { return s.Settled(ns, survivors) })
	took := time.Since(kill)
	// The assigner declares the member dead two lease durations after it last
	// saw a renewal (which came before the kill); allow 2s for the patches on a
	// loaded machine.
	limit := bound + 2*time.Second
	t.Logf("killed %s (leader=%v, %d WebApps): moved to %v in %s (lease bound %s)",
		victim.Member, leader, len(ofVictim), survivors, took.Round(time.Millisecond), bound)
	if took > limit {
		t.Errorf("hand-over took %s, more than the lease bound %s + 2s", took.Round(time.Millisecond), bound)
	}
	moved := map[string]string{}
	for _, n := range ofVictim {
		moved[n] = snap.Owner[n]
	}
	waitSnap(t, f, time.Minute, "moved WebApps reconciled by their new replicas", stayReady, func(s fleet.Snapshot) (bool, string) {
		for n, to := range moved {
			if !reconciledBy(f.Detector.Visits(types.NamespacedName{Namespace: ns, Name: n}), to, kill) {
				return false, n + " not yet reconciled by " + to
			}
		}
		return allReady(s)
	})
	t.Logf("moved WebApps reconciled by their new replicas and all Ready %s after the kill", time.Since(kill).Round(time.Millisecond))
	checkChildren(ctx, t, ns, snap)
	return moved
}

// checkChildren asserts every WebApp's children carry its shard label and
// that the label stayed out of the Deployment's selector and pod template and
// the Service's selector.
func checkChildren(ctx context.Context, t *testing.T, ns string, s fleet.Snapshot) {
	t.Helper()
	key := sharding.ShardLabel(fleet.DefaultRing)
	for _, app := range s.Apps {
		owner := s.Owner[app.Name]
		var dep appsv1.Deployment
		var svc corev1.Service
		var cm corev1.ConfigMap
		for _, c := range []struct {
			name string
			obj  client.Object
		}{{app.Name, &dep}, {app.Name, &svc}, {app.Name + "-config", &cm}} {
			// The assigner labels children a moment after their owner moved.
			deadline := time.Now().Add(10 * time.Second)
			for {
				if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: c.name}, c.obj); err != nil {
					t.Fatalf("child %s of %s: %v", c.name, app.Name, err)
				}
				if c.obj.GetLabels()[key] == owner || time.Now().After(deadline) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if got := c.obj.GetLabels()[key]; got != owner {
				t.Errorf("%T %s: shard label %q, owner %s is on %q", c.obj, c.name, got, app.Name, owner)
			}
		}
		if _, ok := dep.Spec.Selector.MatchLabels[key]; ok {
			t.Errorf("Deployment %s: shard label in spec.selector", app.Name)
		}
		if _, ok := dep.Spec.Template.Labels[key]; ok {
			t.Errorf("Deployment %s: shard label in the pod template", app.Name)
		}
		if _, ok := svc.Spec.Selector[key]; ok {
			t.Errorf("Service %s: shard label in spec.selector", app.Name)
		}
	}
}

// TestDemoRunsBounded runs `go run ./examples/sharded --exit-when-ready` (what
// CI runs): an embedded control plane of its own, three replicas, the
// WebApps Ready, one replica killed, the hand-over, exit 0. run fails when a
// step does not happen within the timeout or two replicas reconciled one
// WebApp at once.
func TestDemoRunsBounded(t *testing.T) {
	o := defaultOptions()
	o.exitWhenReady, o.timeout = true, 3*time.Minute
	// 4s Leases (the demo's default is 2s, renew deadline 1.5s): under -race
	// on 2 busy cores a replica once missed its renew deadline and stopped
	// with "leader election lost" before the demo was Ready.
	o.leaseDuration = 4 * time.Second
	err := run(e2etest.Context(t, 4*time.Minute), o)
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}
