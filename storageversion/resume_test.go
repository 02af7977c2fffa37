package storageversion_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/storageversion"
	"github.com/opkit/opkit/testenv"
)

// TestARestartedMigrationResumesFromItsRecordedPage: a migration stopped
// half-way (the operator restarted: its context cancelled) left its page in
// the CRD's progress annotation; a new Migrator continues from that page —
// it rewrites only what is left (plus at most the page in flight), not every
// object again — and then finishes and trims.
func TestARestartedMigrationResumesFromItsRecordedPage(t *testing.T) {
	ctx := context.Background()
	const (
		group = "resume.test.opkit.dev"
		n     = 300
		page  = 25
	)
	crdName := "widgets." + group
	ns := env.Namespace(t)
	if _, err := applyCRD(t, widgets(group, map[string]bool{"v1": true}, "v1")); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := env.Client.Create(ctx, widget(group, "v1", ns, fmt.Sprintf("w%04d", i), int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := applyCRD(t, widgets(group, map[string]bool{"v1": true, "v2": true}, "v2", "v1")); err != nil {
		t.Fatal(err)
	}

	// First run: 100 rewrites/s, stopped once at least 4 pages are recorded.
	cfg, requests := testenv.CountRequests(env.Config)
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- storageversion.New(c, []string{crdName}, storageversion.WithPageSize(page), storageversion.WithRateLimit(100, 1), storageversion.WithConcurrency(1)).
			Migrate(runCtx, crdName)
	}()
	var before storageversion.Progress
	testenv.WaitForEvery(t, 20*time.Millisecond, 30*time.Second, "4 pages recorded", func() (bool, error) {
		p, _ := storageversion.ReadProgress(getCRD(t, crdName))
		before = p
		return p.Migrated >= 4*page, nil
	})
	stop()
	if err := <-done; err == nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("stopped run returned %v, want context.Canceled", err)
	}
	before, _ = storageversion.ReadProgress(getCRD(t, crdName))
	if before.Done || before.Continue == "" || before.Migrated == 0 || before.Migrated >= n {
		t.Fatalf("progress after the stop %+v: want a continue token and part of the objects", before)
	}
	if got := getCRD(t, crdName).Status.StoredVersions; len(got) != 2 {
		t.Fatalf("storedVersions %v after a stopped run, want both (nothing trimmed)", got)
	}

	// Second run (a new process): resumes.
	requests.Reset()
	if err := storageversion.New(c, []string{crdName}, storageversion.WithPageSize(page), storageversion.WithRateLimit(1000, 100)).Migrate(ctx, crdName); err != nil {
		t.Fatal(err)
	}
	after, _ := storageversion.ReadProgress(getCRD(t, crdName))
	if !after.Done || after.Migrated != n {
		t.Fatalf("progress after resuming %+v, want done with %d", after, n)
	}
	updates := requests.Count("update", "widgets."+group)
	left := n - int(before.Migrated)
	if updates > left+page || updates < left {
		t.Fatalf("the resumed run rewrote %d objects; %d were left (a page is %d): it did not resume from the recorded page", updates, left, page)
	}
	if got := getCRD(t, crdName).Status.StoredVersions; len(got) != 1 || got[0] != "v2" {
		t.Fatalf("storedVersions %v, want [v2]", got)
	}
	t.Logf("stopped after %d of %d; the resumed run rewrote %d", before.Migrated, n, updates)
}
