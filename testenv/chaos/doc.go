// Package chaos injects faults into a [testenv] control plane and checks the
// invariants an operator must keep through them.
//
// Guarantees:
//
//   - Faults are opt-in per client: [InjectErrors] and [ProxyConfig] return
//     a new rest.Config and never change the one given, so the test's own
//     client keeps a clean path to the API server while the operator's does not.
//   - API faults are chosen per request by verb and resource, classified
//     exactly as [testenv.CountRequests] counts them ([testenv.ClassifyRequest]).
//     A rule naming an unknown verb, a probability outside [0, 1] or a
//     malformed fault is an error before any request is sent. Random choices
//     come from the seed only.
//   - Injected errors look like the API server's own: a metav1.Status body
//     with the right code and reason, so apierrors.IsConflict, IsTooManyRequests,
//     IsInternalError, IsTimeout hold; 429 carries Retry-After, which client-go honours.
//   - The [Proxy] listens on 127.0.0.1 only and forwards only to loopback
//     addresses; it is layer 4, so TLS and credentials are untouched.
//   - Every wait is bounded: by its context, by [MaxHang], or by a fixed poll
//     interval; recorded violations are capped in memory (and still counted).
//
// Process faults are methods of [testenv.Env]: Pause and Resume
// (SIGSTOP/SIGCONT of kube-apiserver, etcd or another component) and
// RestartAPIServer (same port, same certificates, same etcd data).
//
// [CountResponses] counts what the API server answered: HTTP status codes
// (429 from API Priority and Fairness) and the 410 Gone ERROR events inside
// watch streams that make informers relist (expired resourceVersions).
// [Proxy.Refuse] takes the server away as a crashed one goes (connections
// refused), which is what makes client-go resume watches from old
// resourceVersions.
//
// Invariants: [ReconcileMonitor] counts reconciles per object (no hot loop),
// detects an object reconciled twice at once (also across a leader and its
// standby) and records panics, whether controller-runtime recovered them or
// not; [Idempotent] asserts a converged object reconciles without writes;
// [FinalizerChecker] asserts a finalizer leaves a deleting object only after
// its cleanup; [ControllerPanics] and [ControllerReconciles] read
// controller-runtime's panic and reconcile counters.
//
// Nothing here needs opkit in the operator under test: chaos and testenv
// import no opkit package outside testenv/ (a test pins it). Every monitor and
// checker works from controller-runtime's own signals or from objects read
// from the API server, so an operator written with controller-runtime alone
// gets all of them:
//
//   - [ReconcileMonitor.Logger] feeds the monitor from the reconcile log lines
//     controller-runtime writes around every reconcile; give it to the manager
//     as its logger and the operator's code is untouched (this is how the
//     package's own suite watches the opkit webapp operator).
//   - [ReconcileMonitor.Wrap] wraps any reconcile.Reconciler instead.
//   - [ControllerPanics] and [ControllerReconciles] read
//     controller_runtime_reconcile_panics_total and
//     controller_runtime_reconcile_total from controller-runtime's metrics
//     registry.
//   - [FinalizerChecker] reads watch events of the checked type; [Idempotent]
//     counts requests with [testenv.CountRequests].
//
// A test puts the operator's manager behind the faults and keeps its own
// client direct:
//
//	proxy, cfg, _ := chaos.ProxyConfig(env.Config)
//	defer proxy.Close()
//	cfg, inj, err := chaos.InjectErrors(cfg, 1, chaos.Rule{
//		Verbs: []string{"update", "patch"}, Resources: []string{"webapps.apps.example.com/status"},
//		Probability: 0.3, Fault: chaos.Conflict(),
//	})
//	mon := chaos.NewReconcileMonitor()
//	mgr, _ := ctrl.NewManager(cfg, ctrl.Options{Logger: mon.Logger(ctrl.Log)})
//	_ = ctrl.NewControllerManagedBy(mgr).For(&appsv1.Deployment{}).Complete(myReconciler)
//	// … start the manager, create objects with env.Client …
//	proxy.Cut()
//	time.Sleep(5 * time.Second) // the fault's duration, not an assertion
//	proxy.Restore()
//	_ = env.Pause(testenv.APIServer) // and env.Resume, env.RestartAPIServer()
//	// … poll until every object converged, then:
//	err = errors.Join(mon.Check(), mon.CheckNoHotLoop(mark, 10))
package chaos
