package fleet

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/conditions"
	webappv1 "github.com/opkit/opkit/examples/webapp/api/v1"
	"github.com/opkit/opkit/sharding"
)

// Snapshot is the state of a namespace's WebApps as the API server has it.
type Snapshot struct {
	// Owner maps each WebApp's name to the member in its shard label ("" when unassigned).
	Owner map[string]string
	// Draining lists WebApps carrying the drain label.
	Draining []string
	// NotReady lists WebApps that are not Ready for their current generation.
	NotReady []string
	// Apps are the WebApps, sorted by name.
	Apps []webappv1.WebApp
}

// Read lists the WebApps of ns and reads their shard labels and readiness.
func Read(ctx context.Context, c client.Reader, ring, ns string) (Snapshot, error) {
	var list webappv1.WebAppList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return Snapshot{}, err
	}
	slices.SortFunc(list.Items, func(a, b webappv1.WebApp) int { return strings.Compare(a.Name, b.Name) })
	s := Snapshot{Owner: map[string]string{}, Apps: list.Items}
	for i := range list.Items {
		app := &list.Items[i]
		s.Owner[app.Name] = app.Labels[sharding.ShardLabel(ring)]
		if _, ok := app.Labels[sharding.DrainLabel(ring)]; ok {
			s.Draining = append(s.Draining, app.Name)
		}
		if !Ready(app) {
			s.NotReady = append(s.NotReady, app.Name)
		}
	}
	return s, nil
}

// Ready reports whether app is Ready for its current generation.
func Ready(app *webappv1.WebApp) bool {
	return conditions.IsTrue(app, conditions.Ready) && app.Status.ObservedGeneration == app.Generation
}

// ByMember groups the WebApps' names by the member that owns them.
func (s Snapshot) ByMember() map[string][]string {
	out := map[string][]string{}
	for _, app := range s.Apps {
		m := s.Owner[app.Name]
		out[m] = append(out[m], app.Name)
	}
	return out
}

// Settled reports whether every WebApp is labelled for the member the ring
// of members places it on and none is draining; otherwise it says what is not.
func (s Snapshot) Settled(ns string, members []string) (bool, string) {
	ring := sharding.NewRing(members)
	for _, app := range s.Apps {
		want := ring.Lookup(sharding.ObjectKey(webAppGK, ns, app.Name))
		if got := s.Owner[app.Name]; got != want {
			return false, fmt.Sprintf("%s is labelled %q, the ring of %v places it on %q", app.Name, got, members, want)
		}
	}
	if len(s.Draining) > 0 {
		return false, fmt.Sprintf("draining: %v", s.Draining)
	}
	return true, ""
}

// Member is one member Lease of the ring.
type Member struct {
	Name, Holder string
	// Renewed is how long ago the Lease was last renewed, by the renewTime it
	// carries and this machine's clock (a replica with a skewed clock,
	// ReplicaOptions.Clock, writes skewed renewTimes; the assigner itself
	// never compares clocks).
	Renewed time.Duration
}

// Members lists the ring's member Leases, the same objects as
// `kubectl get leases -l ring.shard.opkit.dev/name=<ring>`.
func Members(ctx context.Context, c client.Reader, ring, ns string) ([]Member, error) {
	var leases coordinationv1.LeaseList
	if err := c.List(ctx, &leases, client.InNamespace(ns), client.MatchingLabels{sharding.RingLabel: ring}); err != nil {
		return nil, err
	}
	var out []Member
	for _, l := range leases.Items {
		m := Member{Name: l.Labels[sharding.MemberLabel], Holder: ptr.Deref(l.Spec.HolderIdentity, "")}
		if l.Spec.RenewTime != nil {
			m.Renewed = time.Since(l.Spec.RenewTime.Time)
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
