// Package fleet is the sharded webapp operator's building blocks: one
// sharded replica ([NewReplica]: member Lease, shard-restricted cache, the
// webapp controller behind the shard guard, the ring's assigner under leader
// election), several of them run in one process ([NewFleet]), an
// [OverlapDetector] that counts replicas inside one WebApp's reconcile at
// once, and [Read], which snapshots who owns which WebApp. The demo in
// examples/sharded and the sharding scenario of opkit's benchmarks use it.
package fleet
