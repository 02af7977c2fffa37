package ansible_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"

	"github.com/opkit/opkit/ansible"
	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/outcome"
)

var demoGVK = schema.GroupVersionKind{Group: "demo.example.com", Version: "v1", Kind: "Demo"}

// requireAnsible fails (never skips) when ansible-playbook is missing: the
// project's script installs it, and `make test` runs that script first.
func requireAnsible(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("ansible-playbook"); err != nil {
		t.Fatalf("ansible-playbook not found (%v): run hack/ensure-ansible.sh (make ansible) first", err)
	}
}

// playbook writes a playbook with the given tasks (YAML, indented by 4) and
// returns its path.
func playbook(t *testing.T, tasks string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "pb.yml")
	pb := "- hosts: localhost\n  gather_facts: false\n  tasks:\n" + tasks
	if err := os.WriteFile(p, []byte(pb), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func demo(name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec, "status": map[string]any{}}}
	u.SetGroupVersionKind(demoGVK)
	u.SetNamespace("ns1")
	u.SetName(name)
	u.SetUID("uid-1")
	u.SetGeneration(3)
	return u
}

func newRunner(t *testing.T, w ansible.Watch, opts ...ansible.Option) *ansible.Runner {
	t.Helper()
	requireAnsible(t)
	w.GVK = demoGVK
	r, err := ansible.New(w, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func cond(t *testing.T, obj *unstructured.Unstructured, typ string) metav1.Condition {
	t.Helper()
	c := conditions.Get(obj, typ)
	if c == nil {
		t.Fatalf("no %s condition in %v", typ, obj.Object["status"])
	}
	return *c
}

func TestReconcileSuccessPassesSnakeCaseSpecAndMeta(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "vars.json")
	pb := playbook(t, `    - name: dump vars
      ansible.builtin.copy:
        dest: "{{ out }}"
        content: "{{ {'replica_count': replica_count, 'http_port': http_port, 'nested': nested, 'meta': ansible_operator_meta, 'raw': _demo_example_com_demo.spec, 'extra': extra, 'python': ansible_python_interpreter} | to_json }}"
`)
	r := newRunner(t, ansible.Watch{Playbook: pb, Vars: map[string]any{"out": out, "extra": "watch", "replica_count": 99}})
	obj := demo("a", map[string]any{"replicaCount": int64(2), "HTTPPort": int64(80), "nested": map[string]any{"someKey": []any{map[string]any{"innerKey": "x"}}}})
	res, err := r.Reconcile(context.Background(), obj)
	if err != nil {
		t.Fatalf("Reconcile: %v\n%s", err, res.Output)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"replica_count": float64(2), "http_port": float64(80), // the spec wins over the watch's vars
		"nested": map[string]any{"some_key": []any{map[string]any{"inner_key": "x"}}},
		"meta":   map[string]any{"name": "a", "namespace": "ns1", "uid": "uid-1", "generation": float64(3), "labels": nil, "annotations": nil},
		"raw":    map[string]any{"replicaCount": float64(2), "HTTPPort": float64(80), "nested": map[string]any{"someKey": []any{map[string]any{"innerKey": "x"}}}},
		"extra":  "watch",
		"python": ansible.DefaultPythonInterpreter,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("vars (-want +got):\n%s", d)
	}
	if res.Ok != 1 || res.Changed != 1 || res.Failed != 0 || !res.Succeeded() {
		t.Errorf("result %+v", res)
	}
	for typ, status := range map[string]metav1.ConditionStatus{
		ansible.ConditionRunning: metav1.ConditionFalse, ansible.ConditionSuccessful: metav1.ConditionTrue,
		ansible.ConditionFailed: metav1.ConditionFalse, conditions.Ready: metav1.ConditionTrue,
	} {
		if c := cond(t, obj, typ); c.Status != status || c.Reason != ansible.ReasonSuccessful {
			t.Errorf("%s = %s/%s, want %s/%s", typ, c.Status, c.Reason, status, ansible.ReasonSuccessful)
		}
	}
	if m := cond(t, obj, ansible.ConditionSuccessful).Message; !strings.Contains(m, `1 tasks ok (1 changed: "dump vars")`) {
		t.Errorf("Successful message %q", m)
	}
}

func TestKeepCamelCase(t *testing.T) {
	t.Parallel()
	r := newRunner(t, ansible.Watch{Playbook: playbook(t, "    - ansible.builtin.meta: noop\n"), KeepCamelCase: true})
	vars, err := r.Vars(demo("a", map[string]any{"replicaCount": int64(2)}))
	if err != nil {
		t.Fatal(err)
	}
	if vars["replicaCount"] != int64(2) || vars["replica_count"] != nil {
		t.Errorf("vars %v", vars)
	}
}

func TestFailedTaskIsTransientNamesTaskAndWhatRan(t *testing.T) {
	t.Parallel()
	pb := playbook(t, `    - name: first
      ansible.builtin.command: "true"
    - name: tolerated
      ansible.builtin.command: "false"
      ignore_errors: true
    - name: skipped one
      ansible.builtin.command: "true"
      when: false
    - name: the bad task
      ansible.builtin.command: "ls /does-not-exist-opkit"
    - name: never reached
      ansible.builtin.command: "true"
`)
	rec := events.NewFakeRecorder(10)
	r := newRunner(t, ansible.Watch{Playbook: pb}, ansible.WithEventRecorder(rec))
	obj := demo("b", nil)
	res, err := r.Reconcile(context.Background(), obj)
	c := outcome.Classify(err)
	if c.Class != outcome.ClassTransient || c.Reason != ansible.ReasonTaskFailed {
		t.Fatalf("class %v reason %s, want Transient/TaskFailed: %v", c.Class, c.Reason, err)
	}
	for _, want := range []string{`ns1/b`, `task "the bad task" failed`, "does-not-exist-opkit", `1 tasks ok (1 changed: "first")`, "1 skipped", "1 failed and ignored"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("message %q lacks %q", c.Message, want)
		}
	}
	if res.FailedTask == nil || res.FailedTask.Name != "the bad task" || res.Ok != 1 || res.Ignored != 1 || res.Skipped != 1 || res.Failed != 1 {
		t.Errorf("result %+v", res)
	}
	if got := res.Tasks[len(res.Tasks)-1].Name; got != "the bad task" {
		t.Errorf("last task %q: the run went on after the failure", got)
	}
	f := cond(t, obj, ansible.ConditionFailed)
	if f.Status != metav1.ConditionTrue || f.Reason != ansible.ReasonTaskFailed || f.Message != c.Message {
		t.Errorf("Failed condition %+v", f)
	}
	if s := cond(t, obj, ansible.ConditionSuccessful); s.Status != metav1.ConditionFalse {
		t.Errorf("Successful %+v", s)
	}
	select {
	case e := <-rec.Events:
		if !strings.Contains(e, "Warning TaskFailed") || !strings.Contains(e, `task "the bad task" (ansible.builtin.command) failed`) {
			t.Errorf("event %q", e)
		}
	default:
		t.Fatal("no event for the failed task")
	}
	if len(rec.Events) != 0 {
		t.Errorf("%d more events; the ignored failure must not emit one", len(rec.Events))
	}
}

func TestUserErrorsAreTerminal(t *testing.T) {
	t.Parallel()
	cases := map[string]struct{ tasks, reason, msg string }{
		"fail task": {`    - name: check size
      ansible.builtin.fail:
        msg: "size must be small, medium or large"
`, ansible.ReasonTaskFailed, `task "check size" failed: size must be small, medium or large`},
		"assert task": {`    - name: check replicas
      ansible.builtin.assert:
        that: [replicas | int < 10]
`, ansible.ReasonTaskFailed, `task "check replicas" failed`},
		"parse error": {"    - name: broken\n      ansible.builtin.command: [unclosed\n", ansible.ReasonPlaybookInvalid, "exited 4"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := newRunner(t, ansible.Watch{Playbook: playbook(t, tc.tasks)})
			obj := demo("c", map[string]any{"replicas": int64(12)})
			_, err := r.Reconcile(context.Background(), obj)
			c := outcome.Classify(err)
			if c.Class != outcome.ClassTerminal || c.Reason != tc.reason || !strings.Contains(c.Message, tc.msg) {
				t.Fatalf("got %v %s %q, want Terminal %s containing %q", c.Class, c.Reason, c.Message, tc.reason, tc.msg)
			}
			if f := cond(t, obj, ansible.ConditionFailed); f.Reason != tc.reason {
				t.Errorf("Failed %+v", f)
			}
		})
	}
}

// processesWith lists the PIDs whose command line contains token.
func processesWith(t *testing.T, token string) []string {
	t.Helper()
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var pids []string
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err == nil && strings.Contains(string(b), token) {
			pids = append(pids, filepath.Base(filepath.Dir(d)))
		}
	}
	return pids
}

// TestTimeoutKillsTheRunAndNamesTheTask is not parallel: ansible-playbook's
// start-up under load would eat into the timeout (12 s: start-up alone
// took up to ~5 s wall on a loaded 2-core machine).
func TestTimeoutKillsTheRunAndNamesTheTask(t *testing.T) {
	token := "31.4159" + strconv.Itoa(os.Getpid())
	pb := playbook(t, `    - name: quick
      ansible.builtin.command: "true"
    - name: slow
      ansible.builtin.command: "sleep `+token+`"
`)
	rec := events.NewFakeRecorder(10)
	r := newRunner(t, ansible.Watch{Playbook: pb, Timeout: 12 * time.Second}, ansible.WithEventRecorder(rec))
	obj := demo("d", nil)
	// A killed module cannot clean up after itself: whatever the run puts
	// in the temporary directory must go with the run's own.
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	start := time.Now()
	res, err := r.Reconcile(context.Background(), obj)
	took := time.Since(start)
	c := outcome.Classify(err)
	if c.Class != outcome.ClassTransient || c.Reason != ansible.ReasonTimeout || !strings.Contains(c.Message, `in task "slow"`) ||
		!strings.Contains(c.Message, `1 tasks ok (1 changed: "quick")`) {
		t.Fatalf("got %v %s %q", c.Class, c.Reason, c.Message)
	}
	if !res.TimedOut || took > 25*time.Second {
		t.Errorf("TimedOut=%v after %s", res.TimedOut, took)
	}
	t.Logf("killed at the 12s timeout; Reconcile returned after %s", took)
	if pids := processesWith(t, "sleep "+token); len(pids) > 0 {
		t.Errorf("the task's process outlived the timeout: pids %v", pids)
	}
	if e := <-rec.Events; !strings.Contains(e, "Warning Timeout") {
		t.Errorf("event %q", e)
	}
	if left, err := os.ReadDir(tmp); err != nil || len(left) > 0 {
		names := make([]string, 0, len(left))
		for _, e := range left {
			names = append(names, e.Name())
		}
		t.Errorf("the killed run left %v in the temporary directory (%v)", names, err)
	}
}

func TestConcurrencyLimitPerKind(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pb := playbook(t, `    - name: record the run
      ansible.builtin.shell: "date +%s.%N > {{ dir }}/{{ ansible_operator_meta.name }}.start; sleep 1.5; date +%s.%N > {{ dir }}/{{ ansible_operator_meta.name }}.end"
`)
	const limit, runs = 2, 4
	r := newRunner(t, ansible.Watch{Playbook: pb, MaxConcurrent: limit, Vars: map[string]any{"dir": dir}})
	var wg sync.WaitGroup
	errs := make([]error, runs)
	start := time.Now()
	for i := range runs {
		wg.Go(func() { _, errs[i] = r.Reconcile(context.Background(), demo("r"+strconv.Itoa(i), nil)) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	type edge struct {
		at    float64
		delta int
	}
	var edges []edge
	for i := range runs {
		for suffix, delta := range map[string]int{".start": 1, ".end": -1} {
			b, err := os.ReadFile(filepath.Join(dir, "r"+strconv.Itoa(i)+suffix))
			if err != nil {
				t.Fatal(err)
			}
			at, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
			if err != nil {
				t.Fatal(err)
			}
			edges = append(edges, edge{at, delta})
		}
	}
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].at == edges[j].at {
			return edges[i].delta < edges[j].delta
		}
		return edges[i].at < edges[j].at
	})
	peak, cur := 0, 0
	for _, e := range edges {
		cur += e.delta
		peak = max(peak, cur)
	}
	t.Logf("%d runs with MaxConcurrent=%d: peak %d at once, %s in all", runs, limit, peak, time.Since(start).Round(time.Millisecond))
	if peak != limit {
		t.Errorf("peak concurrency %d, want %d", peak, limit)
	}
}

func TestOutputKeepsTheTail(t *testing.T) {
	t.Parallel()
	pb := playbook(t, `    - name: noisy
      ansible.builtin.debug:
        msg: "{{ 'x' * 20000 }}"
`)
	r := newRunner(t, ansible.Watch{Playbook: pb}, ansible.WithOutputLimit(2048))
	res, err := r.Reconcile(context.Background(), demo("e", nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Output) != 2048 || !res.OutputTruncated || !strings.Contains(res.Output, "PLAY RECAP") {
		t.Errorf("output %d bytes, truncated %v, recap kept %v", len(res.Output), res.OutputTruncated, strings.Contains(res.Output, "PLAY RECAP"))
	}
}

func TestRoleAndFinalizer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	role := filepath.Join(dir, "roles", "demo")
	if err := os.MkdirAll(filepath.Join(role, "tasks"), 0o700); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, "marker")
	tasks := "- name: role task\n  ansible.builtin.copy: {dest: \"{{ marker }}\", content: \"{{ ansible_operator_meta.name }} {{ phase }}\"}\n"
	if err := os.WriteFile(filepath.Join(role, "tasks", "main.yml"), []byte(tasks), 0o600); err != nil {
		t.Fatal(err)
	}
	r := newRunner(t, ansible.Watch{
		Role: role, Vars: map[string]any{"marker": marker, "phase": "reconcile"},
		Finalizer: &ansible.Finalizer{Name: "demo.example.com/cleanup", Role: role, Vars: map[string]any{"phase": "finalize"}},
	})
	for _, step := range []struct {
		run  func(context.Context, *unstructured.Unstructured) (*ansible.Result, error)
		want string
	}{
		{func(ctx context.Context, o *unstructured.Unstructured) (*ansible.Result, error) {
			return r.Reconcile(ctx, o)
		}, "f reconcile"},
		{func(ctx context.Context, o *unstructured.Unstructured) (*ansible.Result, error) {
			return r.Finalize(ctx, o)
		}, "f finalize"},
	} {
		if res, err := step.run(context.Background(), demo("f", nil)); err != nil {
			t.Fatalf("%v\n%s", err, res.Output)
		}
		if b, _ := os.ReadFile(marker); string(b) != step.want {
			t.Errorf("marker %q, want %q", b, step.want)
		}
	}
}
