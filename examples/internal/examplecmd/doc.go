// Package examplecmd holds what the example operators' commands share: their
// common flags, where they find a cluster, the embedded control plane they
// start when there is none, and the narration of the embedded demo.
//
// Guarantees: nothing here keeps state between calls or registers anything
// globally except where a function says so ([Main] installs a signal
// handler for the length of the run; [Flags.SetLogger] and
// [Narrator.SetDemoLogger] set controller-runtime's and klog's loggers). A
// demo prints its progress on stdout only through a [Narrator], one line per
// call; the operator's logs go to a file the narrator names (or to stderr
// with -v), so a newcomer reads the demo's story, not the operator's logs.
//
// Secure defaults, as in kubebuilder's scaffold, and as the zero value of
// [Flags]: metrics on :8443 over HTTPS behind
// [github.com/opkit/opkit/observability/metricsauth] (--metrics-secure=false
// for plain HTTP), HTTP/2 off on the metrics and webhook servers
// (--enable-http2), controller-runtime's --zap-* flags bound, and the cluster
// from --kubeconfig, $KUBECONFIG or the in-cluster config.
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
