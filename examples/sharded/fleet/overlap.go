package fleet

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// OverlapDetector watches every replica of the fleet from the inside: it
// counts, per WebApp, how many replicas are inside the webapp Reconciler for
// it at the same moment. The sharding guarantee is that this never exceeds 1.
//
// A replica is inside from the Reconciler's first step (its Get of the WebApp
// through the manager's client, which runs only after sharding.Shard.Begin
// admitted the request) until the reconcile's context is done. That context
// ends when Reconcile returns because every replica's manager sets
// ReconciliationTimeout; the detector refuses to count a reconcile whose
// context has no deadline, since it could not see it end. Seeing the end a
// little late (the context's AfterFunc runs on its own goroutine) can only
// make it report an overlap that did not happen, never hide one.
//
// Safe for concurrent use.
type OverlapDetector struct {
	hold time.Duration

	mu         sync.Mutex
	inside     map[types.NamespacedName]map[string]int // object → member → reconciles inside
	max        int
	worst      string
	reconciles int
	visits     map[types.NamespacedName][]Visit
	errs       []string
}

// Visit is one reconcile of a WebApp that passed the shard guard.
type Visit struct {
	Member string
	// Generation is the WebApp's metadata.generation as the reconcile read it.
	Generation int64
	At         time.Time
}

// NewOverlapDetector returns a detector. hold > 0 makes every counted
// reconcile pause that long after entering, which widens the window in which
// an overlap would show (tests use it).
func NewOverlapDetector(hold time.Duration) *OverlapDetector {
	return &OverlapDetector{
		hold:   hold,
		inside: map[types.NamespacedName]map[string]int{},
		visits: map[types.NamespacedName][]Visit{},
	}
}

func (d *OverlapDetector) enter(ctx context.Context, member string, key types.NamespacedName, id string) {
	if _, ok := ctx.Deadline(); !ok {
		d.mu.Lock()
		d.errs = append(d.errs, fmt.Sprintf("reconcile %s of %s on %s has no deadline: set ReconciliationTimeout", id, key, member))
		d.mu.Unlock()
		return
	}
	d.mu.Lock()
	// Count replicas, not reconciles: one replica's next reconcile of the
	// object may start before the AfterFunc of its previous one ran, and the
	// workqueue already keeps a replica's own workers apart.
	byMember := d.inside[key]
	if byMember == nil {
		byMember = map[string]int{}
		d.inside[key] = byMember
	}
	byMember[member]++
	d.reconciles++
	if n := len(byMember); n > d.max {
		members := make([]string, 0, n)
		for m := range byMember {
			members = append(members, m)
		}
		slices.Sort(members)
		d.max, d.worst = n, fmt.Sprintf("%s by %s", key, strings.Join(members, "+"))
	}
	d.mu.Unlock()
	context.AfterFunc(ctx, func() { d.exit(member, key) })
	if d.hold > 0 {
		time.Sleep(d.hold)
	}
}

func (d *OverlapDetector) exit(member string, key types.NamespacedName) {
	d.mu.Lock()
	defer d.mu.Unlock()
	byMember := d.inside[key]
	if byMember[member]--; byMember[member] <= 0 {
		delete(byMember, member)
	}
	if len(byMember) == 0 {
		delete(d.inside, key)
	}
}

func (d *OverlapDetector) visit(key types.NamespacedName, member string, generation int64) {
	d.mu.Lock()
	d.visits[key] = append(d.visits[key], Visit{Member: member, Generation: generation, At: time.Now()})
	d.mu.Unlock()
}

// Max returns the largest number of replicas seen inside Reconcile for one
// WebApp at the same moment, and which WebApp and replicas that was.
func (d *OverlapDetector) Max() (int, string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.max, d.worst
}

// Reconciles returns how many reconciles passed the shard guard.
func (d *OverlapDetector) Reconciles() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.reconciles
}

// Visits returns the reconciles of key so far, oldest first.
func (d *OverlapDetector) Visits(key types.NamespacedName) []Visit {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.visits[key])
}

// Err reports reconciles the detector could not follow.
func (d *OverlapDetector) Err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.errs) == 0 {
		return nil
	}
	return fmt.Errorf("overlap detector: %s", strings.Join(d.errs, "; "))
}
