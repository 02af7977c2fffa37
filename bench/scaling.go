package bench

import (
	"fmt"
	"math"
	"strings"
)

// scaleFigure is one per-CR figure the scaling section follows across sizes.
type scaleFigure struct {
	scenario, name, unit, file string
	get                        func(*Result) float64
	// per, when set, names the contender whose figure at the same size the
	// figure is divided by (NaN where that contender did not run).
	per string
}

// at is f's value for contender at size in rep, or NaN (also for f.per
// itself, whose figure over its own is 1 by definition).
func (f scaleFigure) at(rep *Report, size int, contender string) float64 {
	v := valueAt(rep, size, f.scenario, contender, f.get)
	if f.per != "" {
		if contender == f.per {
			return math.NaN()
		}
		v /= valueAt(rep, size, f.scenario, f.per, f.get)
	}
	return v
}

// cpuOverCeiling is the contender's CPU per converged CR over the
// ceiling's at the same N. The ceiling's client loop does the same fixed
// work per CR at every size (no cache, no watch, no reads), so its CPU per
// CR measures what one request's client work costs on this machine at that
// size; a contender's CPU per CR over it is the contender's own cost with
// the machine's drift (a larger control plane and heap sharing two cores)
// taken out.
func cpuOverCeiling() scaleFigure {
	return scaleFigure{ScenarioConverge, "operator CPU per converged CR ÷ the ceiling's at the same N", "×", "scaling-cpu-relative.svg", perObj(cpuMs), Ceiling}
}

// scaleFigures are the figures that should stay flat as N grows: what one
// CR costs in memory, writes and CPU.
func scaleFigures() []scaleFigure {
	return []scaleFigure{
		{ScenarioRestart, "heap MiB per 1,000 CR bundles", "MiB", "scaling-heap.svg", mib, ""},
		{ScenarioConverge, "writes per converged CR", "writes", "scaling-writes.svg", perObj(writes), ""},
		{ScenarioConverge, "operator CPU ms per converged CR", "ms", "scaling-cpu.svg", perObj(cpuMs), ""},
		cpuOverCeiling(),
	}
}

// scalingMarkdown writes the scaling section: each contender's per-CR
// figures at every size it ran, and the largest size's figure over the
// smallest's (1.00× is flat).
func scalingMarkdown(b *strings.Builder, rep *Report) {
	b.WriteString("## Scaling\n\n")
	fmt.Fprintf(b, "Each contender at every size it ran (sizes after the first: one fresh control plane per contender, the scenarios as a lifecycle). Per-CR figures should stay flat as N grows; steady state (restart) should stay at zero writes and live GETs.\n\n")
	b.WriteString("| contender | N | converge CR/s | p50 / p99 create → Ready (ms) | writes per CR | CPU ms per CR (converge) | CPU per CR ÷ the ceiling's | heap MiB per 1,000 bundles | restart reconciles/s | restart writes + live GETs | delete CR/s | failed requests |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range contenders {
		for _, size := range sizes(rep) {
			conv, rs, del := rep.FindAt(ScenarioConverge, c, size), rep.FindAt(ScenarioRestart, c, size), rep.FindAt(ScenarioDelete, c, size)
			if conv == nil && rs == nil && del == nil {
				continue
			}
			get := func(r *Result, f func(*Result) float64) float64 {
				if r == nil {
					return math.NaN()
				}
				return f(r)
			}
			steady := get(rs, func(r *Result) float64 { return float64(r.Writes + r.LiveGets) })
			if c == Ceiling {
				steady = math.NaN()
			}
			lat := "n/a"
			if conv != nil && conv.P99 > 0 {
				lat = ms(conv.P50) + " / " + ms(conv.P99)
			}
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", c, count(size),
				num(get(conv, throughput)), lat, num(get(conv, perObj(writes))), num(get(conv, perObj(cpuMs))), ratio(cpuOverCeiling().at(rep, size, c), 1), num(get(rs, mib)),
				num(get(rs, throughput)), num(steady), num(get(del, throughput)), num(get(conv, failedReqs)+get(del, failedReqs)))
		}
	}
	b.WriteString("\nLargest size's figure over the smallest's, per contender (1.00× is flat):\n\n| contender | sizes | ")
	for _, f := range scaleFigures() {
		b.WriteString(f.name + " | ")
	}
	b.WriteString("\n|---|---|")
	for range scaleFigures() {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	for _, c := range contenders {
		var ran []int
		for _, size := range sizes(rep) {
			if rep.FindAt(ScenarioConverge, c, size) != nil || rep.FindAt(ScenarioRestart, c, size) != nil {
				ran = append(ran, size)
			}
		}
		if len(ran) < 2 {
			continue
		}
		lo, hi := ran[0], ran[len(ran)-1]
		for _, s := range ran {
			lo, hi = min(lo, s), max(hi, s)
		}
		fmt.Fprintf(b, "| %s | %s → %s |", c, count(lo), count(hi))
		for _, f := range scaleFigures() {
			fmt.Fprintf(b, " %s |", ratio(f.at(rep, hi, c), f.at(rep, lo, c)))
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

// scalingCharts returns, per scale figure, a line chart of it against N
// (file name → SVG); none when the report has one size.
func scalingCharts(rep *Report) map[string]string {
	out := map[string]string{}
	if len(sizes(rep)) < 2 {
		return out
	}
	for _, f := range scaleFigures() {
		var series []lineSeries
		for _, c := range contenders {
			s := lineSeries{name: c}
			seen := false
			for _, size := range sizes(rep) {
				v := f.at(rep, size, c)
				s.vals = append(s.vals, v)
				seen = seen || !math.IsNaN(v)
			}
			if seen {
				series = append(series, s)
			}
		}
		labels := make([]string, 0, len(sizes(rep)))
		for _, size := range sizes(rep) {
			labels = append(labels, count(size))
		}
		out[f.file] = lineChart("scaling: "+f.name+" against N", f.unit, labels, series)
	}
	return out
}

// lineSeries is one contender's values at each x label (NaN: not run).
type lineSeries struct {
	name string
	vals []float64
}

// lineChart draws each series as a line over evenly spaced x labels (the
// sizes, not to scale), with its values printed at the points.
func lineChart(title, unit string, labels []string, series []lineSeries) string {
	if len(series) == 0 || len(labels) == 0 {
		return ""
	}
	top := 0.0
	for _, s := range series {
		for _, v := range s.vals {
			if !math.IsNaN(v) {
				top = math.Max(top, v)
			}
		}
	}
	top = niceMax(top * 1.15)
	var b strings.Builder
	svgOpen(&b, title)
	yAxis(&b, top, unit)
	slot := float64(plotW) / float64(len(labels))
	xAt := func(i int) float64 { return float64(padL) + slot*(float64(i)+0.5) }
	for i, l := range labels {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="%s">N = %s</text>`+"\n", xAt(i), padT+plotH+18, txtCol, l)
	}
	for si, s := range series {
		var pts []string
		for i, v := range s.vals {
			if math.IsNaN(v) {
				continue
			}
			x, y := xAt(i), float64(padT+plotH)-float64(plotH)*v/top
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>`+"\n", x, y, color(s.name))
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="10" fill="%s">%s</text>`+"\n", x, y-7, color(s.name), num(v))
		}
		if len(pts) > 1 {
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", color(s.name), strings.Join(pts, " "))
		}
		ly := padT + 10 + si*20
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>`+"\n", padL+plotW+8, ly, padL+plotW+24, ly, color(s.name))
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="%s">%s</text>`+"\n", padL+plotW+28, ly+4, txtCol, s.name)
	}
	b.WriteString("</svg>\n")
	return b.String()
}
