// Package canary rolls a new version of a sharded operator out over part of
// its objects first, judges it against the stable version, and widens it
// step by step to every object or rolls it back — with opkit's sharding
// (member Leases, the weighted ring, the drain hand-over) as the only
// mechanism: no second deployment of the CRDs, no webhook, no traffic split.
//
// # Guarantees
//
//   - One version per object at a time. The rollout only writes member
//     weights ([sharding.WeightAnnotation]); every object that changes
//     version moves through the [sharding.Assigner]'s drain hand-over, so
//     the sharding guarantee holds through every widening and roll back: an
//     object is inside at most one member's reconcile, of either version
//     (provided reconciles return within the dead grace; see sharding).
//   - Nothing lost, nothing duplicated. Moving an object relabels it and its
//     children; no object or child is deleted or re-created by the rollout.
//     After a roll back every object is reconciled by a stable member again,
//     which writes its children in the stable version's shape.
//   - Roll back reaches every canary object: it ends (phase RolledBack) only
//     when no object carries a canary member's shard label and every object
//     is where the ring without the canary places it. The canary members
//     keep weight 0 (on their Leases, across restarts) until removed, and the
//     same canary version is never rolled out again by itself.
//   - A failing canary is rolled back at the first check that sees it worse
//     than the stable version, without waiting for the window; a pass needs
//     the whole window ([WithWindow]) at a step that has settled (every
//     object on the member the weighted ring places it on, none draining).
//   - Only one replica steers: the [Rollout] runs under the manager's leader
//     election. Its state lives in a ConfigMap, so a newly elected replica
//     continues where the last one stopped.
//   - A person overrides with one annotation on that ConfigMap
//     ([ActionAnnotation]: pause, resume, promote, abort), acted on within
//     one check interval.
//
// # How a rollout goes
//
// Every replica runs [sharding.NewShard] with [sharding.WithVersion] (its
// operator version); the replicas of a new version also start with
// [sharding.WithWeight](0), so they join the ring owning nothing. The
// elected replica's [Rollout] notices a ready member announcing a version
// other than the stable one and starts:
//
//	Idle ──new version──▶ Progressing(10%) ─pass─▶ (25%) ─pass─▶ (50%) ─pass─▶ (100%) ─pass─▶ Promoted
//	                           │  any step: fail, or "abort"          ▲ "promote": Promoting
//	                           ▼                                      │
//	                      RollingBack ──no object on the canary──▶ RolledBack
//
// At each step the rollout writes weights on the member Leases so the canary
// members together own about that share of the hash space ([Weights]), waits
// until the assigner has moved the objects, then judges the two cohorts
// ([Cohort]: objects, Ready, Stalled, Degraded, not Ready in time,
// reconcile errors through [WithErrorCounts]) with its [Judge]
// ([DefaultJudge] by default) at every check, for one window. After a
// promotion the canary version is the stable one; its predecessor's members
// keep weight 0 until they are removed.
//
// # Seeing and steering it
//
//	kubectl get configmap canary-<ring> -n <lease namespace> -o yaml     # phase, versions, percent, counts, verdict, message
//	kubectl annotate configmap canary-<ring> canary.opkit.dev/action=abort
//	kubectl get leases -l ring.shard.opkit.dev/name=<ring> \
//	  -o custom-columns=MEMBER:.metadata.labels.ring\.shard\.opkit\.dev/member,VERSION:.metadata.annotations.ring\.shard\.opkit\.dev/version,WEIGHT:.metadata.annotations.ring\.shard\.opkit\.dev/weight
//
// [Metrics] exports opkit_canary_* (phase, percent, step, objects and
// unhealthy objects per cohort, decisions); [WithEventRecorder] emits an
// event on the ConfigMap at each transition.
//
// # Usage
//
//	shard, _ := sharding.NewShard("web", podName, ns, sharding.WithVersion(version), sharding.WithWeight(weight)) // 0 for a canary build
//	// … the member's cache, controller and assigner as in the sharding package …
//	rollout, _ := canary.New("web", ns, &v1.Web{}, canary.WithSteps(10, 25, 50, 100), canary.WithWindow(10*time.Minute))
//	_ = rollout.SetupWithManager(mgr) // runs on the elected replica only
//
// The rollout's replica needs, beyond what the sharding assigner needs:
// get, list, watch, create and patch on ConfigMaps and patch on Leases in the
// lease namespace, list and watch on the judged type, and create on
// events.k8s.io Events for [WithEventRecorder].
//
// Limits: stable members must announce their version ([sharding.WithVersion];
// until one does, nothing rolls out). A canary whose members are all gone
// holds the rollout (verdict Wait, message saying so) until one is back or a
// person aborts; its objects have moved to the stable members by then, since
// the assigner moves a dead member's objects at once. The judge sees what the
// objects' conditions say and, with [WithErrorCounts], reconcile errors;
// anything else (latency, the workload's own health) needs a [Judge] of one's
// own.
//
// The package imports only sharding and the base package conditions.
package canary
