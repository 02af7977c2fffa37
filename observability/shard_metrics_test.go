package observability_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/opkit/opkit/observability"
)

func TestShardMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := observability.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.ShardRing("web", 3)
	m.ShardEvent("web", "a", "assigned")
	m.ShardEvent("web", "a", "assigned")
	m.ShardEvent("web", "b", "moved_out")
	m.ShardObjects("web", map[string]int{"a": 2, "b": 1, "": 0})
	m.ShardObjects("web", map[string]int{"a": 3}) // b left the ring: its gauge drops to 0

	want := `
# HELP opkit_shard_events_total Sharding events by ring, member and event (assigned, moved_in, moved_out, drain_requested, drain_acknowledged).
# TYPE opkit_shard_events_total counter
opkit_shard_events_total{event="assigned",member="a",ring="web"} 2
opkit_shard_events_total{event="moved_out",member="b",ring="web"} 1
# HELP opkit_shard_objects Objects labelled for each member of a sharding ring (member="" counts unassigned objects), as last counted by the ring's assigner.
# TYPE opkit_shard_objects gauge
opkit_shard_objects{member="",ring="web"} 0
opkit_shard_objects{member="a",ring="web"} 3
opkit_shard_objects{member="b",ring="web"} 0
# HELP opkit_shard_ring_members Ready members in the ring at its last recomputation.
# TYPE opkit_shard_ring_members gauge
opkit_shard_ring_members{ring="web"} 3
# HELP opkit_shard_ring_recomputations_total Times the ring was rebuilt because its set of ready members changed.
# TYPE opkit_shard_ring_recomputations_total counter
opkit_shard_ring_recomputations_total{ring="web"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"opkit_shard_events_total", "opkit_shard_objects", "opkit_shard_ring_members", "opkit_shard_ring_recomputations_total"); err != nil {
		t.Fatal(err)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "opkit_shard") {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	}
}
