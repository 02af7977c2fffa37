package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/opkit/opkit/ansible"
	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/examples/internal/e2etest"
	"github.com/opkit/opkit/examples/internal/examplecmd"
	webv1 "github.com/opkit/opkit/examples/playbook/api/v1"
	"github.com/opkit/opkit/examples/playbook/config"
	"github.com/opkit/opkit/examples/playbook/controller"
	"github.com/opkit/opkit/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	scheme := e2etest.Must(newScheme())
	crds := e2etest.Must(config.CRDs())
	os.Exit(testenv.RunMain(m, &env, testenv.WithCRDs(crds...), testenv.WithScheme(scheme)))
}

// operator starts the Site controller in namespace ns with runner.
func operator(t *testing.T, ns string, runner *ansible.Runner, opts controller.Options) {
	t.Helper()
	m := e2etest.NewManager(t, env.Config, env.Scheme, ns)
	if opts.Observability == nil {
		opts.Observability = m.Observability
	}
	if err := controller.Setup(m, runner, opts); err != nil {
		t.Fatal(err)
	}
	m.Run(t)
}

// siteRunner is the example's own runner (embedded playbooks, watches.yaml).
func siteRunner(t *testing.T) *ansible.Runner {
	t.Helper()
	requireAnsible(t)
	r, err := newRunner(t.TempDir(), env.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// customRunner runs the given playbook for Sites (tests of failures, timeouts
// and concurrency, on the example's kind).
func customRunner(t *testing.T, tasks string, w ansible.Watch) *ansible.Runner {
	t.Helper()
	requireAnsible(t)
	p := filepath.Join(t.TempDir(), "pb.yml")
	if err := os.WriteFile(p, []byte("- hosts: localhost\n  gather_facts: false\n  tasks:\n"+tasks), 0o600); err != nil {
		t.Fatal(err)
	}
	w.GVK, w.Playbook = webv1.GroupVersion.WithKind("Site"), p
	r, err := ansible.New(w, ansible.WithKubeconfig(env.KubeconfigPath))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func requireAnsible(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(ansible.DefaultPythonInterpreter); err != nil {
		t.Fatalf("%s: %v: run hack/ensure-ansible.sh (make ansible)", ansible.DefaultPythonInterpreter, err)
	}
	if _, err := exec.LookPath("ansible-playbook"); err != nil {
		t.Fatalf("ansible-playbook: %v: run hack/ensure-ansible.sh (make ansible)", err)
	}
}

func site(ns, name string, replicas int32) *webv1.Site {
	return &webv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: webv1.SiteSpec{Message: "hi " + name, Replicas: replicas, HTTPPort: 8080}}
}

func get(ctx context.Context, t *testing.T, ns, name string) *webv1.Site {
	t.Helper()
	s := &webv1.Site{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		t.Fatal(err)
	}
	return s
}

// waitCondition waits until the Site's condition typ has status and, for the
// generation the Site has, returns it.
func waitCondition(ctx context.Context, t *testing.T, ns, name, typ string, status metav1.ConditionStatus, timeout time.Duration) metav1.Condition {
	t.Helper()
	var got metav1.Condition
	e2etest.WaitFor(t, timeout, fmt.Sprintf("Site %s %s=%s", name, typ, status), func() (bool, error) {
		s := &webv1.Site{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
			return false, err
		}
		c := conditions.Get(s, typ)
		if c == nil || c.Status != status || c.ObservedGeneration != s.Generation {
			return false, fmt.Errorf("conditions %+v", s.Status.Conditions)
		}
		got = *c
		return true, nil
	})
	return got
}

var runTook = regexp.MustCompile(`succeeded in ([0-9.]+m?s)`)

func TestSiteLifecycle(t *testing.T) {
	ctx := e2etest.Context(t, 4*time.Minute)
	ns := env.Namespace(t)
	operator(t, ns, siteRunner(t), controller.Options{})
	start := time.Now()
	if err := env.Client.Create(ctx, site(ns, "hello", 2)); err != nil {
		t.Fatal(err)
	}
	ok := waitCondition(ctx, t, ns, "hello", ansible.ConditionSuccessful, metav1.ConditionTrue, 2*time.Minute)
	t.Logf("create → Successful in %s; %s", time.Since(start).Round(time.Millisecond), ok.Message)
	if !strings.Contains(ok.Message, `3 tasks ok (3 changed: "site content", "site deployment", "site service")`) {
		t.Errorf("Successful message %q", ok.Message)
	}
	waitCondition(ctx, t, ns, "hello", conditions.Ready, metav1.ConditionTrue, time.Minute)
	s := get(ctx, t, ns, "hello")
	if !strings.Contains(strings.Join(s.Finalizers, ","), "web.example.com/cleanup") {
		t.Errorf("finalizers %v", s.Finalizers)
	}
	// The finalizer's addition triggers a second run right after the first
	// (see README): wait for it to end too.
	if r := waitCondition(ctx, t, ns, "hello", ansible.ConditionRunning, metav1.ConditionFalse, time.Minute); r.Reason != ansible.ReasonSuccessful {
		t.Errorf("Running %+v", r)
	}
	cm := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hello-content"}, cm); err != nil || cm.Data["index.html"] != "hi hello" {
		t.Fatalf("ConfigMap: %v %v", err, cm.Data)
	}
	if len(cm.OwnerReferences) != 1 || cm.OwnerReferences[0].UID != s.UID {
		t.Errorf("ConfigMap owners %+v", cm.OwnerReferences)
	}
	dep := &appsv1.Deployment{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hello"}, dep); err != nil || *dep.Spec.Replicas != 2 {
		t.Fatalf("Deployment: %v", err)
	}
	svc := &corev1.Service{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hello"}, svc); err != nil || svc.Spec.Ports[0].Port != 8080 {
		t.Fatalf("Service: %v %+v", err, svc.Spec.Ports)
	}

	// A spec change runs the playbook again.
	// A second run may be writing status meanwhile: retry on conflict.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(s), s); err != nil {
			return err
		}
		s.Spec.Replicas, s.Spec.HTTPPort = 3, 9090
		return env.Client.Update(ctx, s)
	}); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	ok = waitCondition(ctx, t, ns, "hello", ansible.ConditionSuccessful, metav1.ConditionTrue, 2*time.Minute)
	t.Logf("spec change → Successful (generation 2) in %s; %s", time.Since(start).Round(time.Millisecond), ok.Message)
	if m := runTook.FindStringSubmatch(ok.Message); m != nil {
		t.Logf("per-run time of ansible-playbook (3 kubernetes.core tasks), as reported: %s", m[1])
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hello"}, dep); err != nil || *dep.Spec.Replicas != 3 {
		t.Fatalf("Deployment after the change: %v replicas %d", err, *dep.Spec.Replicas)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hello"}, svc); err != nil || svc.Spec.Ports[0].Port != 9090 {
		t.Fatalf("Service after the change: %v %+v", err, svc.Spec.Ports)
	}

	// Delete: the finalizer playbook removes the children (this control
	// plane runs no garbage collector, so only the playbook can), then the
	// finalizer goes.
	start = time.Now()
	if err := env.Client.Delete(ctx, s); err != nil {
		t.Fatal(err)
	}
	e2etest.WaitFor(t, 2*time.Minute, "Site hello gone", func() (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(s), &webv1.Site{})
		return apierrors.IsNotFound(err), err
	})
	t.Logf("delete → finalizer playbook → Site gone in %s", time.Since(start).Round(time.Millisecond))
	for _, o := range []client.Object{&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hello-content"}}, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "hello"}}, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "hello"}}} {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: o.GetName()}, o); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s still there after the finalizer playbook: %v", o, o.GetName(), err)
		}
	}
}

// runLog is a task that appends the run's start time to a file per Site.
const runLog = `    - name: log the run
      ansible.builtin.shell: "date +%s.%N >> {{ dir }}/{{ ansible_operator_meta.name }}.runs"
`

func runStarts(t *testing.T, dir, name string) []float64 {
	t.Helper()
	return runTimes(t, dir, name+".runs")
}

// runTimes reads the timestamps (seconds) a playbook appended to dir/file.
func runTimes(t *testing.T, dir, file string) []float64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, file))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []float64
	for _, l := range strings.Fields(string(b)) {
		f, err := strconv.ParseFloat(l, 64)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	return out
}

func TestFailedTaskIsReportedAndBacksOff(t *testing.T) {
	ctx := e2etest.Context(t, 4*time.Minute)
	ns := env.Namespace(t)
	dir := t.TempDir()
	r := customRunner(t, runLog+`    - name: site content
      kubernetes.core.k8s:
        state: present
        definition: {apiVersion: v1, kind: ConfigMap, metadata: {name: "{{ ansible_operator_meta.name }}-content", namespace: "{{ ansible_operator_meta.namespace }}"}}
    - name: log the failure's start
      ansible.builtin.shell: "date +%s.%N >> {{ dir }}/{{ ansible_operator_meta.name }}.fails"
    - name: read the upstream config
      kubernetes.core.k8s_info: {kind: ConfigMap, namespace: "{{ ansible_operator_meta.namespace }}", name: upstream}
      register: upstream
      failed_when: upstream.resources | length == 0
`, ansible.Watch{Vars: map[string]any{"dir": dir}})
	// Retries 2s, 4s, 8s, … after each failed run (the default starts at
	// 5ms, which a run of seconds hides): the gaps must grow.
	operator(t, ns, r, controller.Options{RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](2*time.Second, 30*time.Second)})
	if err := env.Client.Create(ctx, site(ns, "broken", 1)); err != nil {
		t.Fatal(err)
	}
	failed := waitCondition(ctx, t, ns, "broken", ansible.ConditionFailed, metav1.ConditionTrue, 2*time.Minute)
	if failed.Reason != ansible.ReasonTaskFailed || !strings.Contains(failed.Message, `task "read the upstream config" failed`) ||
		!strings.Contains(failed.Message, `"site content"`) {
		t.Errorf("Failed %+v", failed)
	}
	s := get(ctx, t, ns, "broken")
	if c := conditions.Get(s, conditions.Reconciling); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Reconciling %+v (a transient failure is retried)", c)
	}
	if conditions.Get(s, conditions.Stalled) != nil {
		t.Errorf("Stalled on a transient failure")
	}
	e2etest.WaitFor(t, time.Minute, "a TaskFailed event naming the task", func() (bool, error) {
		var evs eventsv1.EventList
		if err := env.Client.List(ctx, &evs, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Reason == ansible.ReasonTaskFailed && e.Regarding.Name == "broken" && e.Type == corev1.EventTypeWarning &&
				strings.Contains(e.Note, `task "read the upstream config"`) {
				return true, nil
			}
		}
		return false, nil
	})
	// Backoff, not a hot loop: 5 runs, the waits between a run's failing
	// task and the next run's start growing (2s, 4s, 8s, 16s nominally, each
	// plus the failing task, the process's exit and the next start — about
	// a second or two; measured from the failing task, not from the run's
	// start, so the run's own duration, which varies by seconds on a loaded
	// machine, is not in it).
	e2etest.WaitForEvery(t, time.Second, 3*time.Minute, "5 runs", func() (bool, error) { return len(runStarts(t, dir, "broken")) >= 5, nil })
	starts, fails := runStarts(t, dir, "broken"), runTimes(t, dir, "broken.fails")
	var gaps []float64
	for i := 0; i+1 < len(starts) && i < len(fails); i++ {
		gaps = append(gaps, starts[i+1]-fails[i])
	}
	t.Logf("from a failing task to the next run's start with a 2s-base exponential backoff: %.1f s", gaps)
	if len(gaps) < 4 || gaps[3] < 10 || gaps[3] < gaps[0]+6 {
		t.Errorf("waits do not grow like a 2s-base backoff (want the 4th ≥ 10s and ≥ the 1st + 6s): %.1f s", gaps)
	}
	// The dependency appears: the next retry succeeds.
	if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "upstream"}}); err != nil {
		t.Fatal(err)
	}
	waitCondition(ctx, t, ns, "broken", conditions.Ready, metav1.ConditionTrue, 2*time.Minute)
}

func TestUserErrorStallsWithoutRetry(t *testing.T) {
	ctx := e2etest.Context(t, 3*time.Minute)
	ns := env.Namespace(t)
	dir := t.TempDir()
	r := customRunner(t, runLog+`    - name: check the message
      ansible.builtin.assert:
        that: ["message != 'forbidden'"]
        fail_msg: "message must not be 'forbidden'"
`, ansible.Watch{Vars: map[string]any{"dir": dir}})
	operator(t, ns, r, controller.Options{})
	s := site(ns, "picky", 1)
	s.Spec.Message = "forbidden"
	if err := env.Client.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	stalled := waitCondition(ctx, t, ns, "picky", conditions.Stalled, metav1.ConditionTrue, 2*time.Minute)
	if stalled.Reason != ansible.ReasonTaskFailed || !strings.Contains(stalled.Message, "message must not be 'forbidden'") {
		t.Errorf("Stalled %+v", stalled)
	}
	time.Sleep(8 * time.Second)
	if n := len(runStarts(t, dir, "picky")); n != 1 {
		t.Errorf("%d runs in 8s after a user error, want 1 (no retry until the spec changes)", n)
	}
	s = get(ctx, t, ns, "picky")
	s.Spec.Message = "fine"
	if err := env.Client.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	waitCondition(ctx, t, ns, "picky", conditions.Ready, metav1.ConditionTrue, 2*time.Minute)
	if c := conditions.Get(get(ctx, t, ns, "picky"), conditions.Stalled); c != nil {
		t.Errorf("Stalled left after the fix: %+v", c)
	}
}

func TestTimeoutIsReported(t *testing.T) {
	ctx := e2etest.Context(t, 3*time.Minute)
	ns := env.Namespace(t)
	// Runs killed at the timeout leave nothing in the temporary directory:
	// checked after the operator stopped (cleanups run last-in first-out),
	// its last run with it.
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	t.Cleanup(func() {
		entries, err := os.ReadDir(tmp)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "ansible") || strings.HasPrefix(e.Name(), "opkit-ansible-") {
				t.Errorf("left in the temporary directory after killed runs: %s", e.Name())
			}
		}
	})
	r := customRunner(t, `    - name: too slow
      ansible.builtin.command: sleep 60
`, ansible.Watch{Timeout: 12 * time.Second}) // start-up alone can take ~5 s on a loaded machine
	operator(t, ns, r, controller.Options{})
	if err := env.Client.Create(ctx, site(ns, "slow", 1)); err != nil {
		t.Fatal(err)
	}
	failed := waitCondition(ctx, t, ns, "slow", ansible.ConditionFailed, metav1.ConditionTrue, 2*time.Minute)
	if failed.Reason != ansible.ReasonTimeout || !strings.Contains(failed.Message, `timed out after 12s in task "too slow"`) {
		t.Errorf("Failed %+v", failed)
	}
}

func TestConcurrencyLimit(t *testing.T) {
	ctx := e2etest.Context(t, 4*time.Minute)
	ns := env.Namespace(t)
	dir := t.TempDir()
	const limit, sites = 2, 5
	r := customRunner(t, `    - name: record the run
      ansible.builtin.shell: "date +%s.%N > {{ dir }}/{{ ansible_operator_meta.name }}.start; sleep 2; date +%s.%N > {{ dir }}/{{ ansible_operator_meta.name }}.end"
`, ansible.Watch{MaxConcurrent: limit, Vars: map[string]any{"dir": dir}})
	operator(t, ns, r, controller.Options{})
	start := time.Now()
	for i := range sites {
		if err := env.Client.Create(ctx, site(ns, "s"+strconv.Itoa(i), 1)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range sites {
		waitCondition(ctx, t, ns, "s"+strconv.Itoa(i), ansible.ConditionSuccessful, metav1.ConditionTrue, 3*time.Minute)
	}
	type edge struct {
		at    float64
		delta int
	}
	var edges []edge
	read := func(name string) float64 {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	for i := range sites {
		edges = append(edges, edge{read("s" + strconv.Itoa(i) + ".start"), 1}, edge{read("s" + strconv.Itoa(i) + ".end"), -1})
	}
	sort.Slice(edges, func(i, j int) bool {
		return edges[i].at < edges[j].at || edges[i].at == edges[j].at && edges[i].delta < edges[j].delta
	})
	peak, cur := 0, 0
	for _, e := range edges {
		cur += e.delta
		peak = max(peak, cur)
	}
	t.Logf("%d Sites, MaxConcurrent=%d: peak %d playbooks at once; all Successful %s after creation", sites, limit, peak, time.Since(start).Round(time.Millisecond))
	if peak != limit {
		t.Errorf("peak %d playbooks at once, want %d", peak, limit)
	}
}

func TestDemoRunsBounded(t *testing.T) {
	requireAnsible(t)
	ctx := e2etest.Context(t, 4*time.Minute)
	err := run(ctx, options{Flags: examplecmd.Flags{Embedded: true, ExitWhenReady: true, Timeout: 3 * time.Minute, MetricsAddr: "0", ProbeAddr: "0"}, ansiblePlaybook: "ansible-playbook"})
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}
