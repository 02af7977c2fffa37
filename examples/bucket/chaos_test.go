package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/opkit/opkit/conditions"
	storagev1 "github.com/opkit/opkit/examples/bucket/api/v1"
	"github.com/opkit/opkit/examples/bucket/controller"
	"github.com/opkit/opkit/examples/internal/e2etest"
	"github.com/opkit/opkit/testenv"
	"github.com/opkit/opkit/testenv/chaos"
)

// TestChaosNoLostOrDuplicateBuckets runs the bucket operator behind an L4
// proxy while Buckets are created (and a few deleted) at a steady rate, and
// injects in turn: an API server restart, an API server pause longer than
// the operator's client timeout, and a network cut between the operator and
// the API server. After each fault every live Bucket must become Ready and
// the cloud must hold exactly one bucket per live Bucket — recognised by its
// request token and named as its status says — and none for a deleted one.
//
// The test's own client (env.Client) stays direct; it still sees the
// restart and the pause, so its writes are retried (a create that timed out
// but happened is found by AlreadyExists, a delete by NotFound).
func TestChaosNoLostOrDuplicateBuckets(t *testing.T) {
	const (
		perFault      = 4 // creates per fault; the fault starts after the second
		createEvery   = 400 * time.Millisecond
		clientTimeout = 3 * time.Second
		pauseFor      = 5 * time.Second // longer than clientTimeout
		cutFor        = 5 * time.Second
		convergeIn    = 40 * time.Second
	)
	f := newFixture(t)
	panics0 := bucketPanics(t)

	proxy, cfg, err := chaos.ProxyConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	cfg.Timeout = clientTimeout
	startOperator(t, f, cfg, nil)
	// Registered after startOperator, so it runs before the operator stops
	// and before the namespace is deleted: the package's other tests share
	// this API server, which must be running and answering when this test
	// ends, however it ends.
	t.Cleanup(func() {
		proxy.Restore()
		if err := env.Resume(testenv.APIServer); err != nil {
			t.Errorf("resume the API server: %v", err)
		}
		ctx := e2etest.Context(t, time.Minute)
		waitFor(t, 30*time.Second, "the API server to answer after the faults", func() (bool, error) {
			actx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			return true, env.Client.List(actx, &corev1.NamespaceList{}, client.Limit(1))
		})
	})

	ctx := e2etest.Context(t, 3*time.Minute)
	st := &chaosState{ns: f.ns, alive: map[string]types.UID{}, deleted: map[string]types.UID{}}

	faults := []struct {
		name   string
		inject func(t *testing.T)
	}{
		{"API server restart", func(t *testing.T) {
			if err := env.RestartAPIServer(); err != nil {
				t.Fatal(err)
			}
		}},
		{fmt.Sprintf("API server paused %s (client timeout %s)", pauseFor, clientTimeout), func(t *testing.T) {
			if err := env.Pause(testenv.APIServer); err != nil {
				t.Fatal(err)
			}
			time.Sleep(pauseFor) // the fault's duration, not an assertion
			if err := env.Resume(testenv.APIServer); err != nil {
				t.Fatal(err)
			}
		}},
		{fmt.Sprintf("network cut %s", cutFor), func(t *testing.T) {
			proxy.Cut()
			time.Sleep(cutFor) // the fault's duration, not an assertion
			proxy.Restore()
		}},
	}

	t.Logf("| %-42s | objects | faults | lost | duplicates | leaked | recovery |", "fault")
	for i, fault := range faults {
		names := make([]string, perFault)
		for j := range names {
			names[j] = fmt.Sprintf("chaos-%d-%d", i, j)
		}
		// The load: creates at a steady rate, through the fault.
		created := make(chan string, perFault)
		loadErr := make(chan error, 1)
		go func() {
			defer close(created)
			tick := time.NewTicker(createEvery)
			defer tick.Stop()
			for _, name := range names {
				if err := st.create(ctx, name); err != nil {
					loadErr <- err
					return
				}
				created <- name
				<-tick.C
			}
			loadErr <- nil
		}()
		// The first Bucket of the batch is deleted during the fault, most
		// likely while the operator is still creating its cloud bucket.
		victim := <-created
		<-created
		deleteErr := make(chan error, 1)
		go func() { deleteErr <- st.remove(ctx, victim) }()

		fault.inject(t)
		faultEnd := time.Now()
		if err := <-loadErr; err != nil {
			t.Fatal(err)
		}
		if err := <-deleteErr; err != nil {
			t.Fatal(err)
		}

		v := st.waitConverged(t, f, convergeIn)
		t.Logf("| %-42s | %7d | %6d | %4d | %10d | %6d | %8s |", fault.name, v.alive, 1, len(v.lost), len(v.duplicates), len(v.leaked),
			recoveryOf(v, faultEnd))
		if !v.converged {
			t.Fatalf("%s: not converged within %s after the fault: %s", fault.name, convergeIn, v)
		}
	}

	// The end state, once more, with the exact counts.
	v := st.check(ctx, f)
	if !v.converged || v.alive != len(faults)*(perFault-1) || len(st.deleted) != len(faults) {
		t.Fatalf("final state: %d live Buckets, %d deleted: %s", v.alive, len(st.deleted), v)
	}
	if n := bucketPanics(t); n != panics0 {
		t.Fatalf("%v reconcile panics in controller %q during the faults", n-panics0, controller.Name)
	}
}

func bucketPanics(t *testing.T) float64 {
	t.Helper()
	n, err := chaos.ControllerPanics(crmetrics.Registry, controller.Name)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// chaosState is what the test created and deleted: Bucket name → UID (a
// cloud bucket is recognised as a Bucket's by its request token, which
// carries the UID).
type chaosState struct {
	ns      string
	mu      sync.Mutex
	alive   map[string]types.UID
	deleted map[string]types.UID
}

// retryAPI calls fn with a short deadline until it succeeds or ctx ends:
// the test's own client sees the restart and the pause too.
func retryAPI(ctx context.Context, what string, fn func(context.Context) error) error {
	for {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := fn(actx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last error: %w)", what, ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// create makes Bucket name and records its UID. A create whose answer was
// lost may have happened: AlreadyExists then means this test's object.
func (s *chaosState) create(ctx context.Context, name string) error {
	key := client.ObjectKey{Namespace: s.ns, Name: name}
	var uid types.UID
	err := retryAPI(ctx, "create Bucket "+key.String(), func(ctx context.Context) error {
		b := newBucket(s.ns, name)
		err := env.Client.Create(ctx, b)
		if apierrors.IsAlreadyExists(err) {
			err = env.Client.Get(ctx, key, b)
		}
		uid = b.UID
		return err
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.alive[name] = uid
	return nil
}

// remove deletes Bucket name (NotFound counts as done: an earlier attempt's
// answer was lost).
func (s *chaosState) remove(ctx context.Context, name string) error {
	key := client.ObjectKey{Namespace: s.ns, Name: name}
	err := retryAPI(ctx, "delete Bucket "+key.String(), func(ctx context.Context) error {
		err := env.Client.Delete(ctx, newBucket(s.ns, name))
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deleted[name] = s.alive[name]
	delete(s.alive, name)
	return nil
}

// verdict compares the API and the cloud with what the test did.
type verdict struct {
	converged  bool
	at         time.Time // when the check ran
	alive      int
	notReady   []string // live Buckets not Ready for their generation
	lost       []string // live Buckets without a cloud bucket
	duplicates []string // cloud buckets beyond the first of a live Bucket
	leaked     []string // cloud buckets of no live Bucket (deleted or unknown)
	misnamed   []string // cloud buckets not named as the Bucket's status says
	lingering  []string // deleted Buckets still in the API
	err        error
}

func (v verdict) String() string {
	return fmt.Sprintf("notReady %v, lost %v, duplicates %v, leaked %v, misnamed %v, deleted but present %v, error %v",
		v.notReady, v.lost, v.duplicates, v.leaked, v.misnamed, v.lingering, v.err)
}

func (s *chaosState) check(ctx context.Context, f *fixture) verdict {
	s.mu.Lock()
	alive, deleted := make(map[string]types.UID, len(s.alive)), make(map[string]types.UID, len(s.deleted))
	for k, v := range s.alive {
		alive[k] = v
	}
	for k, v := range s.deleted {
		deleted[k] = v
	}
	s.mu.Unlock()

	v := verdict{at: time.Now(), alive: len(alive)}
	var list storagev1.BucketList
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if v.err = env.Client.List(lctx, &list, client.InNamespace(s.ns)); v.err != nil {
		return v
	}
	inAPI := map[string]*storagev1.Bucket{}
	for i := range list.Items {
		inAPI[list.Items[i].Name] = &list.Items[i]
	}
	byToken := map[string][]string{}
	for _, c := range f.cloud.Buckets() {
		byToken[c.ClientToken] = append(byToken[c.ClientToken], c.Name)
	}
	for name, uid := range alive {
		b, ok := inAPI[name]
		switch {
		case !ok || b.UID != uid:
			v.notReady = append(v.notReady, name+" (missing)")
		case !conditions.IsTrue(b, conditions.Ready) || b.Status.ObservedGeneration != b.Generation || conditions.IsTrue(b, conditions.Reconciling):
			v.notReady = append(v.notReady, name)
		}
		token := controller.RequestToken(&storagev1.Bucket{ObjectMeta: metav1.ObjectMeta{UID: uid}})
		own := byToken[token]
		delete(byToken, token)
		switch {
		case len(own) == 0:
			v.lost = append(v.lost, name)
		case len(own) > 1:
			v.duplicates = append(v.duplicates, own[1:]...)
		}
		if ok && len(own) == 1 && (own[0] != controller.ExternalName(b) || b.Status.ExternalName != "" && own[0] != b.Status.ExternalName) {
			v.misnamed = append(v.misnamed, fmt.Sprintf("%s→%s", name, own[0]))
		}
	}
	for _, names := range byToken {
		v.leaked = append(v.leaked, names...)
	}
	for name, uid := range deleted {
		if b, ok := inAPI[name]; ok && b.UID == uid {
			v.lingering = append(v.lingering, name)
		}
	}
	for _, l := range [][]string{v.notReady, v.lost, v.duplicates, v.leaked, v.misnamed, v.lingering} {
		sort.Strings(l)
	}
	v.converged = len(v.notReady)+len(v.lost)+len(v.duplicates)+len(v.leaked)+len(v.misnamed)+len(v.lingering) == 0
	return v
}

// waitConverged polls until the API and the cloud agree with the test's
// record, or timeout; it returns the last verdict either way.
func (s *chaosState) waitConverged(t *testing.T, f *fixture, timeout time.Duration) verdict {
	t.Helper()
	ctx := e2etest.Context(t, timeout+10*time.Second)
	deadline := time.Now().Add(timeout)
	for {
		v := s.check(ctx, f)
		if v.converged || time.Now().After(deadline) {
			return v
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func recoveryOf(v verdict, faultEnd time.Time) string {
	if !v.converged {
		return "never"
	}
	return v.at.Sub(faultEnd).Round(100 * time.Millisecond).String()
}
