package main

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbv1 "github.com/opkit/opkit/examples/database/api/v1"
	"github.com/opkit/opkit/examples/database/backup"
	"github.com/opkit/opkit/examples/database/controller"
	"github.com/opkit/opkit/examples/internal/e2etest"
)

// jobEvents follows the Jobs of ns: every watch event's type, Job name and
// UID, and whether it had completed, in order, on a channel and in a log.
type jobEvent struct {
	typ      watch.EventType
	name     string
	uid      types.UID
	complete bool
}

func watchJobs(t *testing.T, ns string) <-chan jobEvent {
	t.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := wc.Watch(ctx, &batchv1.JobList{}, client.InNamespace(ns))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	out := make(chan jobEvent, 256)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(out)
		for ev := range w.ResultChan() {
			j, ok := ev.Object.(*batchv1.Job)
			if !ok {
				continue
			}
			complete := false
			for _, c := range j.Status.Conditions {
				if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
					complete = true
				}
			}
			out <- jobEvent{typ: ev.Type, name: j.Name, uid: j.UID, complete: complete}
		}
	}()
	t.Cleanup(func() { w.Stop(); cancel(); <-done })
	return out
}

// TestProcessKilledMidFinalBackup runs the database operator as it ships
// (this package's main, built with `go build`) as a separate OS process
// against the test's API server, with its backup catalog in a file
// (--backup-catalog) as a real catalog outlives the operator. A deleted
// Database's cleanup has two steps: the Deleting phase runs the final
// backup Job, then the finalizer's step verifies the backup is in the
// catalog. The first process is SIGKILLed the instant the final backup Job
// exists (step 1 half done), the second the instant that Job has completed
// (between the steps), and a third finishes. The Database must go only
// after the catalog holds its final backup; the Job must have been created
// once (one ADDED event, one UID) and the catalog must hold one final record.
func TestProcessKilledMidFinalBackup(t *testing.T) {
	bin := e2etest.Build(t, ".")
	ns := env.Namespace(t)
	catalogFile := filepath.Join(t.TempDir(), "catalog.json")
	start := func(name string) *e2etest.Process {
		return e2etest.Start(t, name, bin,
			"--kubeconfig", env.KubeconfigPath,
			"--watch-namespace", ns,
			"--backup-catalog", catalogFile,
			"--metrics-bind-address", "0", "--health-probe-bind-address", "0",
		)
	}
	ctx := e2etest.Context(t, 3*time.Minute)
	jobs := watchJobs(t, ns)
	first := start("database-operator-1")
	db := newDB(ns, "precious", "v1", 1)
	if err := env.Client.Create(ctx, db); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, db, "Ready")
	final := controller.FinalBackupName(db)

	t0 := time.Now()
	if err := env.Client.Delete(ctx, db); err != nil {
		t.Fatal(err)
	}
	var added []types.UID
	// next returns the next event of the final backup Job that satisfies cond.
	next := func(what string, cond func(jobEvent) bool) jobEvent {
		t.Helper()
		timeout := time.After(90 * time.Second)
		for {
			select {
			case ev, ok := <-jobs:
				if !ok {
					t.Fatalf("the Job watch ended while waiting for %s", what)
				}
				if ev.name != final {
					continue
				}
				if ev.typ == watch.Added {
					added = append(added, ev.uid)
				}
				if cond(ev) {
					return ev
				}
			case <-timeout:
				t.Fatalf("no %s in 90s", what)
			}
		}
	}
	// held reports whether the Database still waits for its finalizer, and
	// whether the catalog file records its final backup.
	held := func() (bool, bool) {
		var cur dbv1.Database
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(db), &cur)
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		c, cerr := backup.Open(catalogFile)
		if cerr != nil {
			t.Fatal(cerr)
		}
		_, recorded := c.Find(ns+"/"+db.Name, string(db.UID), backup.ReasonFinal)
		return err == nil && slices.Contains(cur.Finalizers, controller.FinalizerName), recorded
	}

	job := next("final backup Job created", func(ev jobEvent) bool { return ev.typ == watch.Added })
	first.Kill()
	firstHeld, firstRecorded := held()
	if !firstHeld || firstRecorded {
		t.Fatalf("killed at the final backup Job's creation, but the Database is held=%v and the catalog has it=%v: the kill missed the cleanup", firstHeld, firstRecorded)
	}

	second := start("database-operator-2")
	next("final backup Job complete", func(ev jobEvent) bool { return ev.complete })
	second.Kill()
	secondHeld, secondRecorded := held()
	t.Logf("second process killed when the Job completed: Database held %v, final backup in the catalog %v", secondHeld, secondRecorded)

	start("database-operator-3")
	e2etest.WaitFor(t, 90*time.Second, "Database "+db.Name+" gone", func() (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(db), &dbv1.Database{})
		return apierrors.IsNotFound(err), err
	})
	gone := time.Since(t0)
	c, err := backup.Open(catalogFile)
	if err != nil {
		t.Fatal(err)
	}
	finals := 0
	for _, b := range c.List(ns + "/" + db.Name) {
		if b.Reason == backup.ReasonFinal && b.UID == string(db.UID) {
			finals++
			if b.ID != final || b.Version != "v1" {
				t.Errorf("final backup record %+v", b)
			}
		}
	}
	if finals != 1 {
		t.Errorf("%d final backup records in the catalog, want 1: %+v", finals, c.List(ns+"/"+db.Name))
	}
	// Drain the events so far: the Job was created once, never again.
	for drained := false; !drained; {
		select {
		case ev := <-jobs:
			if ev.name == final && ev.typ == watch.Added {
				added = append(added, ev.uid)
			}
		case <-time.After(time.Second):
			drained = true
		}
	}
	if len(added) != 1 || added[0] != job.uid {
		t.Errorf("final backup Job created %d times (UIDs %v), want once", len(added), added)
	}
	t.Logf("2 SIGKILLs (at the Job's creation; at its completion), 3 processes; Database gone %s after the delete; final backup Job created %d time(s), %d final record(s) in the catalog",
		gone.Round(100*time.Millisecond), len(added), finals)
}
