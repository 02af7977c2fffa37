// Package bench compares opkit's examples/webapp operator with the same
// operator written the kubebuilder-book way (package baseline) and with the
// API server's own ceiling, on real control planes from testenv.
//
// [Run] runs each scenario (converge, no-op restart with memory, spec churn,
// delete) for each contender on a fresh control plane, one after another,
// and writes report.md, report.json and SVG charts. The sharding scenario
// (opkit only; [ShardingResult]) runs the webapp operator as three sharded
// replicas (examples/sharded/fleet) against one unsharded replica on a
// control plane of its own: heap per shard, a graceful and an ungraceful
// hand-over. Every request figure is
// counted on the contender's own client with testenv.CountRequests; nothing
// is estimated. The numbers measure this machine at this moment: nothing
// here asserts a speed.
//
// The command is bench/cmd/opkit-bench (`make bench`, `make bench-quick`).
package bench
