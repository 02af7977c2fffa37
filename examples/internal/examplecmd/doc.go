// Package examplecmd holds what the example operators' commands share: their
// common flags, where they find a cluster, the embedded control plane they
// start when there is none, and the narration of the embedded demo.
//
// Guarantees: nothing here keeps state between calls or registers anything
// globally except where a function says so ([Main] installs a signal
// handler for the length of the run). A demo prints its progress on stdout
// only through a [Narrator], one line per call, so the operator's logs on
// stderr never interleave with it mid-line.
//
// Usage, in an example's main.go:
//
//	const narrator examplecmd.Narrator = "webapp"
//
//	func main() {
//		var o options // embeds examplecmd.Flags
//		o.Register(flag.CommandLine, "embedded demo: exit 0 once every sample WebApp is Ready", 5*time.Minute)
//		flag.Parse()
//		o.ReadKubeconfig(flag.CommandLine)
//		examplecmd.Main("webapp", func(ctx context.Context) error { return run(ctx, o) })
//	}
package examplecmd
