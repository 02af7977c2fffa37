package main

import (
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/conditions"
	storagev1 "github.com/opkit/opkit/examples/bucket/api/v1"
	"github.com/opkit/opkit/examples/bucket/cloud"
	"github.com/opkit/opkit/examples/bucket/controller"
	"github.com/opkit/opkit/examples/internal/e2etest"
)

// The tests in this file run the bucket operator as it ships — this
// package's main, built with `go build` — as a separate OS process against
// the test's API server (--kubeconfig) and fake cloud (--cloud-endpoint), and
// kill it with SIGKILL: no deferred function, no cancelled context, no
// request finished. A new process must finish the work, and the fake
// cloud's call log must show every external side effect happened exactly
// once.

// operatorProcess starts the built operator on f's namespace and cloud.
func operatorProcess(t *testing.T, bin string, f *fixture, name string) *e2etest.Process {
	t.Helper()
	return e2etest.Start(t, name, bin,
		"--kubeconfig", env.KubeconfigPath,
		"--watch-namespace", f.ns,
		"--cloud-endpoint", f.url,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0",
		"--resync", "2s",
	)
}

// creates counts the CreateBucket calls that made a bucket (201), by bucket.
func creates(f *fixture) map[string]int {
	made := map[string]int{}
	for _, c := range f.cloud.Calls() {
		if c.Op == cloud.OpCreate && c.Status == 201 {
			made[c.Bucket]++
		}
	}
	return made
}

// TestProcessKilledMidCreateMakesEachBucketOnce: every operator process is
// SIGKILLed at the instant the cloud has made a bucket for it and before the
// answer leaves the cloud (the fake cloud's create hook), so no process
// ever learns of a bucket it made. Each Bucket's create is interrupted once;
// a fresh process must find the bucket (same request token), not make a
// second one: the call log shows exactly one 201 per Bucket.
func TestProcessKilledMidCreateMakesEachBucketOnce(t *testing.T) {
	bin := e2etest.Build(t, ".")
	var mu sync.Mutex
	var current *e2etest.Process
	kills := map[string]int{} // bucket → processes killed at its create
	f := newFixture(t, cloud.WithCreateHook(func(b cloud.Bucket) {
		mu.Lock()
		defer mu.Unlock()
		if current != nil && kills[b.Name] == 0 {
			kills[b.Name]++
			current.KillAsync()
		}
	}))
	ctx := e2etest.Context(t, 3*time.Minute)
	start := time.Now()
	const n = 3
	buckets := make([]*storagev1.Bucket, n)
	for i := range buckets {
		buckets[i] = newBucket(f.ns, fmt.Sprintf("crash-%d", i))
		if err := env.Client.Create(ctx, buckets[i]); err != nil {
			t.Fatal(err)
		}
	}
	allReady := func() bool {
		for _, b := range buckets {
			var got storagev1.Bucket
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(b), &got); err != nil ||
				!conditions.IsTrue(&got, conditions.Ready) || got.Status.ObservedGeneration != got.Generation {
				return false
			}
		}
		return true
	}
	processes := 0
	var last *e2etest.Process
	for !allReady() {
		if processes == 2*n+1 {
			t.Fatalf("%d operator processes and the Buckets are still not Ready; kills %v", processes, kills)
		}
		processes++
		// Held across the start, so a create the new process makes at once
		// still finds it in current.
		mu.Lock()
		p := operatorProcess(t, bin, f, fmt.Sprintf("bucket-operator-%d", processes))
		current = p
		mu.Unlock()
		last = p
		deadline := time.After(60 * time.Second)
	wait:
		for {
			select {
			case <-p.Exited():
				break wait
			case <-deadline:
				t.Fatalf("process %d neither died nor made every Bucket Ready in 60s; kills %v", processes, kills)
			case <-time.After(200 * time.Millisecond):
				if allReady() {
					break wait
				}
			}
		}
		if err := p.Err(); err != nil {
			t.Logf("process %d (pid %d) ended: %v", processes, p.Pid(), err)
		}
	}
	recovery := time.Since(start)
	select {
	case <-last.Exited():
		t.Fatalf("the last process exited: %v", last.Err())
	default:
	}

	mu.Lock()
	killed := len(kills)
	mu.Unlock()
	if killed != n {
		t.Fatalf("processes killed mid-create for %d Buckets, want %d (%v): the test proved less than it claims", killed, n, kills)
	}
	made := creates(f)
	inCloud := f.cloud.Buckets()
	if len(inCloud) != n {
		t.Fatalf("%d buckets in the cloud, want %d: %+v", len(inCloud), n, inCloud)
	}
	replays := 0
	for _, c := range f.cloud.Calls() {
		if c.Op == cloud.OpCreate && c.Status == 200 {
			replays++
		}
	}
	for _, b := range buckets {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			t.Fatal(err)
		}
		if made[b.Status.ExternalName] != 1 {
			t.Errorf("%s: %d CreateBucket calls made cloud bucket %q, want exactly 1 (call log %v)", b.Name, made[b.Status.ExternalName], b.Status.ExternalName, made)
		}
		ext, ok := f.cloud.Get(b.Status.ExternalName)
		if !ok || ext.ClientToken != controller.RequestToken(b) {
			t.Errorf("%s: cloud bucket %q (found %v) not made with this Bucket's request token %s", b.Name, b.Status.ExternalName, ok, controller.RequestToken(b))
		}
		var conn corev1.Secret
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: b.Name + "-connection"}, &conn); err != nil {
			t.Errorf("%s: connection Secret: %v", b.Name, err)
		} else if string(conn.Data[controller.ConnectionSecretAccessKey]) != ext.SecretAccessKey {
			t.Errorf("%s: the connection Secret holds another bucket's credentials", b.Name)
		}
	}
	t.Logf("%d Buckets, %d operator processes (%d SIGKILLed at a cloud create), %d CreateBucket calls made a bucket, %d replays found one; all Ready %s after the first create",
		n, processes, killed, len(made), replays, recovery.Round(100*time.Millisecond))
}

// TestProcessKilledMidDeleteRemovesBucketOnce: the operator process is
// SIGKILLed after the cloud accepted the DeleteBucket (202) and while the
// bucket is still Deleting, so the finalizer's cleanup is half done: the
// delete issued, its completion not yet verified. A fresh process must
// finish it — wait for the 404, then remove the finalizer — without the
// Bucket going before its cloud bucket.
func TestProcessKilledMidDeleteRemovesBucketOnce(t *testing.T) {
	bin := e2etest.Build(t, ".")
	f := newFixture(t, cloud.WithDeleteDelay(4*time.Second))
	ctx := e2etest.Context(t, 3*time.Minute)
	first := operatorProcess(t, bin, f, "bucket-operator-1")
	b := newBucket(f.ns, "doomed")
	if err := env.Client.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	waitReady(t, b)
	name := b.Status.ExternalName
	deleted := func() int { return f.cloud.CallCount(cloud.OpDelete) }
	t0 := time.Now()
	if err := env.Client.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the operator's DeleteBucket call", func() (bool, error) { return deleted() > 0, nil })
	first.Kill()
	ext, inCloud := f.cloud.Get(name)
	if !inCloud || ext.State != cloud.StateDeleting {
		t.Fatalf("killed mid-cleanup, but the cloud bucket is %+v (found %v), not Deleting: the test proved nothing", ext, inCloud)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil || len(b.Finalizers) == 0 {
		t.Fatalf("after the kill the Bucket should still be held by its finalizer: %v %v", err, b.Finalizers)
	}

	operatorProcess(t, bin, f, "bucket-operator-2")
	waitFor(t, 60*time.Second, "Bucket doomed gone", func() (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(b), &storagev1.Bucket{})
		if apierrors.IsNotFound(err) {
			if ext, ok := f.cloud.Get(name); ok {
				t.Fatalf("the finalizer let the Bucket go while its cloud bucket is %s", ext.State)
			}
			return true, nil
		}
		return false, err
	})
	if n := deleted(); n != 1 {
		t.Errorf("%d DeleteBucket calls, want 1: the new process must see the delete in progress, not issue it again", n)
	}
	if n := len(creates(f)); n != 1 {
		t.Errorf("%d buckets made, want 1", n)
	}
	t.Logf("killed between DeleteBucket (202) and its verification; a new process finished the cleanup %s after the delete; %d DeleteBucket calls",
		time.Since(t0).Round(100*time.Millisecond), deleted())
}
