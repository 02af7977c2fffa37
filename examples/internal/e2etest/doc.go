// Package e2etest holds what the example operators' end-to-end tests share:
// deadlines, polling, and starting an operator's manager the way every test
// does — scoped to the test's namespace, its API requests counted — or the
// example's own binary as a separate process ([Build], [Start]) that a test
// can kill with SIGKILL.
//
// Guarantees: every helper that fails the test does so with t.Fatal from the
// test's goroutine, naming what was awaited and the last error seen; polling
// never sleeps past its deadline by more than one interval; everything a
// helper starts is stopped, and waited for, before the test ends.
//
// Usage, with an env from testenv.RunMain:
//
//	m := e2etest.NewManager(t, env.Config, env.Scheme, ns)
//	if err := controller.Setup(m, controller.Options{Observability: m.Observability}); err != nil {
//		t.Fatal(err)
//	}
//	m.Run(t)
//	e2etest.WaitFor(t, time.Minute, "WebApp Ready", func() (bool, error) { … })
package e2etest
