package phase

import (
	"fmt"
	"strings"
)

// Mermaid renders the declared machine as a Mermaid stateDiagram-v2. The
// output depends only on the declaration: phases in declaration order, each
// phase's targets in declaration order, then its timeout edge (labelled
// "timeout <budget>"). Phases of a kind other than Progressing and guarded
// phases carry a description; the deletion phase is drawn as a final state
// entered "on deletion, from any phase".
func (m *Machine[T]) Mermaid() string {
	c := m.c
	var b strings.Builder
	b.WriteString("stateDiagram-v2\n")
	fmt.Fprintf(&b, "    [*] --> %s\n", c.initial)
	for _, s := range c.order {
		if d := describePhase(s); d != "" {
			fmt.Fprintf(&b, "    %s : %s\n", s.name, d)
		}
	}
	for _, s := range c.order {
		for _, t := range s.targets {
			fmt.Fprintf(&b, "    %s --> %s\n", s.name, t)
		}
		if s.hasTimeout {
			fmt.Fprintf(&b, "    %s --> %s : timeout %s\n", s.name, s.timeoutTarget, s.timeout)
		}
		if s.deletion {
			fmt.Fprintf(&b, "    %s --> [*]\n", s.name)
		}
	}
	return b.String()
}

// DOT renders the declared machine as a Graphviz digraph, with the same
// content and ordering as [Machine.Mermaid]: timeout edges are dashed,
// guarded phases are drawn with a double border, the deletion phase is a
// grey node reached by a dotted edge from a "deleted" point.
func (m *Machine[T]) DOT() string {
	c := m.c
	var b strings.Builder
	fmt.Fprintf(&b, "digraph %q {\n", c.name)
	b.WriteString("  rankdir=LR;\n")
	b.WriteString("  node [shape=box, style=rounded];\n")
	b.WriteString("  \"__start\" [shape=point, label=\"\"];\n")
	for _, s := range c.order {
		label := string(s.name)
		if d := describePhase(s); d != "" {
			label += `\n(` + d + `)`
		}
		// Phase names and descriptions need no escaping (see phaseName);
		// \n is DOT's line break inside a label.
		attrs := `label="` + label + `"`
		if s.approval {
			attrs += ", peripheries=2"
		}
		if s.deletion {
			attrs += ", style=\"rounded,filled\", fillcolor=lightgrey"
		}
		fmt.Fprintf(&b, "  %q [%s];\n", s.name, attrs)
	}
	fmt.Fprintf(&b, "  \"__start\" -> %q;\n", c.initial)
	for _, s := range c.order {
		for _, t := range s.targets {
			fmt.Fprintf(&b, "  %q -> %q;\n", s.name, t)
		}
		if s.hasTimeout {
			fmt.Fprintf(&b, "  %q -> %q [label=%q, style=dashed];\n", s.name, s.timeoutTarget, "timeout "+s.timeout.String())
		}
		if s.deletion {
			b.WriteString("  \"__deleted\" [shape=point, label=\"\"];\n")
			fmt.Fprintf(&b, "  \"__deleted\" -> %q [label=\"on deletion\", style=dotted];\n", s.name)
		}
	}
	b.WriteString("}\n")
	return b.String()
}

func describePhase(s *phaseSpec) string {
	var parts []string
	if s.deletion {
		parts = append(parts, "on deletion, from any phase")
	} else if s.kind != KindProgressing {
		parts = append(parts, strings.ToLower(s.kind.String()))
	}
	if s.approval {
		parts = append(parts, "approval required")
	}
	return strings.Join(parts, ", ")
}
