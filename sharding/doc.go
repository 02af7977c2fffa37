// Package sharding spreads the objects of one controller over several
// replicas of an operator, in-process: no separate sharder deployment and no
// webhook.
//
// # Guarantees
//
//   - One reconciler per object: an object is reconciled by at most one
//     replica at a time, provided every Reconcile returns within the dead
//     grace (by default one lease duration) after its replica stopped
//     renewing its Lease. The guard ([Shard.Begin], [Wrap]) registers a
//     reconcile as in flight before it checks ownership against the cache, a
//     member acknowledges a drain only when nothing of that object is in
//     flight, and a member whose last successful Lease renewal is older than
//     its lease duration starts nothing. The [Assigner] moves an object
//     without a drain only when its member released its Lease or the Lease
//     has not changed for duration+grace by the assigner's own clock.
//   - Nothing is lost: with no ready member, objects keep their labels (new
//     objects stay unassigned) and are assigned once a member is ready.
//   - Minimal movement: objects are placed by consistent hashing (xxhash,
//     [DefaultVirtualNodes] points per member); a member joining or leaving
//     moves only the objects that move to or from it.
//   - Weights steer shares without breaking the above: a member's Lease
//     announces a weight ([WeightAnnotation], [WithWeight]) and a version
//     ([VersionAnnotation], [WithVersion]); the assigner's ring gives a
//     member of weight w about w/Σw of the hash space ([WithWeights]) and
//     none at weight 0. Changing a weight moves objects only to or from that
//     member, through the same drain hand-over as a join. A Lease change that
//     only rewrites these annotations is not a renewal, so steering a dead
//     member's weight cannot make it look alive. The sharding/canary package
//     rolls a new operator version out with it.
//   - Children follow their controller owner: they are labelled with the
//     owner's current shard and hashed on nothing of their own. When the
//     assigner moves an owner it labels the children first, so the new
//     member's first reconcile finds them in its cache rather than trying
//     to create them again.
//   - Clock skew is harmless: Lease ages are measured on the observer's clock
//     from the moment it saw the Lease change, never from timestamps written
//     by another machine (a member writes its Lease's times from its own
//     clock, [WithClock]; replicas ±30 s apart are tested).
//   - One process per member name: a second process started with a member
//     name whose Lease is held by a live instance waits (reconciling nothing)
//     until that Lease is released or dead.
//
// # Modes
//
// Dynamic (labels): every replica creates a [Shard] with [NewShard], restricts
// its cache to [Shard.LabelSelector] and guards its reconciler with [Wrap];
// each replica also adds the ring's [Assigner], which only the replica elected
// through the manager's leader election runs. The member's controllers and
// its Lease run without leader election. Labels: ShardLabel(ring) =
// member ("shard.opkit.dev/<ring>") and, during a hand-over,
// DrainLabel(ring) ("drain.shard.opkit.dev/<ring>"). `kubectl get leases
// -l ring.shard.opkit.dev/name=<ring>` lists the members.
//
// Hand-over: when a member joins, the assigner sets the drain label on the
// objects that move to it; their current member stops starting reconciles of
// them, waits for running ones, and removes both labels in one
// optimistic-locked patch; the assigner then labels them for the new member.
// When a member leaves gracefully it refuses new reconciles, waits for running
// ones, and releases its Lease; its objects move at once. When it crashes,
// they move once its Lease is dead (two lease durations by default).
//
// Static (labels): [NewStaticShard] owns whatever is labelled for it; no Lease,
// no assigner.
//
// Server-side: when kube-apiserver runs with the ShardedListAndWatch alpha
// gate ([ServerSideSupported] detects it), [NewServerSideShard] makes a
// replica list and watch only the objects whose FNV-1a hash of metadata.uid
// falls into its ranges on a fixed ring ([Shard.NewInformer]); nothing is
// written. Membership is static in this mode: hand-over between server-side
// shards is not implemented, so every replica must be started with the same
// member list. Fall back to labels when the probe says no.
//
// # Usage
//
//	shard, _ := sharding.NewShard("web", podName, ns)
//	mgr, _ := manager.New(cfg, manager.Options{
//		LeaderElection: true, LeaderElectionID: "web-assigner", // for the assigner only
//		Cache: cache.Options{ByObject: shard.CacheByObject(&v1.Web{}, &appsv1.Deployment{})},
//	})
//	_ = shard.SetupWithManager(mgr, &v1.Web{})
//	a, _ := sharding.NewAssigner("web", ns, sharding.WithChildren(&v1.Web{}, &appsv1.Deployment{}))
//	_ = a.SetupWithManager(mgr)
//	_ = builder.ControllerManagedBy(mgr).For(&v1.Web{}, builder.WithPredicates(shard.Predicate())).
//		Owns(&appsv1.Deployment{}).
//		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
//		Complete(sharding.Wrap[v1.Web](shard, reconciler))
//
// Reconcilers that create children should call [Shard.LabelChild] so the new
// child is in the member's cache at once.
//
// Metrics: [Metrics] (from [NewMetrics]) is an [Observer]; pass it to
// [WithObserver] of the assigner and of each member (the reconciler package
// does this for a member it is given). Events
// "ShardMoved" and "ShardDrain" are emitted with [WithEventRecorder].
package sharding
