package ansible

import (
	"bufio"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/outcome"
)

//go:embed callback/opkit_events.py
var callbackFS embed.FS

// Condition types a [Runner] writes on the object.
const (
	// ConditionRunning is True while a reconcile run is in progress (written
	// to the API server before the playbook starts, with [WithClient]) and
	// False, with reason [ReasonSuccessful] or [ReasonFailed], after it.
	ConditionRunning = "Running"
	// ConditionSuccessful is True when the last reconcile run succeeded,
	// False when it failed.
	ConditionSuccessful = "Successful"
	// ConditionFailed is True when the last reconcile run failed (reason
	// [ReasonTaskFailed], [ReasonTimeout], [ReasonPlaybookInvalid] or
	// [ReasonPlaybookError]; the message names the failing task and what the
	// run did before it), False after a successful run.
	ConditionFailed = "Failed"
)

// Reasons on the conditions and events a [Runner] writes.
const (
	ReasonRunning    = "Running"
	ReasonSuccessful = "Successful"
	ReasonFailed     = "Failed"
	// ReasonTaskFailed: a task failed (event per failed task, and the Failed
	// condition).
	ReasonTaskFailed = "TaskFailed"
	// ReasonTimeout: the run exceeded [Watch.Timeout] and was killed.
	ReasonTimeout = "Timeout"
	// ReasonPlaybookInvalid: ansible-playbook refused the playbook or its
	// options before running a task (exit code 4 or 5), or a task declared
	// the input invalid.
	ReasonPlaybookInvalid = "PlaybookInvalid"
	// ReasonPlaybookError: ansible-playbook failed without a failed task
	// (unreachable host, crash).
	ReasonPlaybookError = "PlaybookError"
)

// Event actions (events.k8s.io "action") of a [Runner]'s events.
const (
	ActionReconcile = "RunPlaybook"
	ActionFinalize  = "RunFinalizer"
)

// DefaultOutputLimit is how many bytes of ansible-playbook's combined
// stdout and stderr a [Result] keeps (the tail) when [WithOutputLimit] is
// not given.
const DefaultOutputLimit = 64 << 10

// DefaultPythonInterpreter is the ansible_python_interpreter given to every
// run unless [WithPythonInterpreter] says otherwise: Debian's ansible runs
// on /usr/bin/python3, which is where python3-kubernetes (needed by the
// kubernetes.core collection) is installed, whatever python3 is first on
// PATH.
const DefaultPythonInterpreter = "/usr/bin/python3"

// terminalActions are the task actions whose failure is a user error
// (Stalled, not retried until the object changes): the playbook's author
// declared the input invalid with fail or assert.
var terminalActions = []string{"fail", "assert", "ansible.builtin.fail", "ansible.builtin.assert", "ansible.legacy.fail", "ansible.legacy.assert"}

// Runner runs one kind's playbooks for its objects. It is safe for
// concurrent use; at most [Watch.MaxConcurrent] ansible-playbook processes
// run at once.
type Runner struct {
	w           Watch
	command     string
	python      string
	kubeconfig  string
	env         []string
	outputLimit int
	recorder    events.EventRecorder
	client      client.Client
	clock       clock.PassiveClock
	sem         chan struct{}
}

// Option configures a [Runner].
type Option func(*Runner)

// WithCommand sets the ansible-playbook executable (a path, or a name looked
// up on PATH); default "ansible-playbook".
func WithCommand(path string) Option { return func(r *Runner) { r.command = path } }

// WithPythonInterpreter sets the ansible_python_interpreter variable of every
// run; default [DefaultPythonInterpreter]. An empty path leaves Ansible's own
// interpreter discovery.
func WithPythonInterpreter(path string) Option { return func(r *Runner) { r.python = path } }

// WithKubeconfig sets K8S_AUTH_KUBECONFIG for the runs, the kubeconfig the
// kubernetes.core modules use when a task names none.
func WithKubeconfig(path string) Option { return func(r *Runner) { r.kubeconfig = path } }

// WithEnv adds environment variables ("NAME=value") to the runs, after the
// operator's own environment and the runner's TMPDIR and ANSIBLE_* settings
// (so they win).
func WithEnv(env ...string) Option {
	return func(r *Runner) { r.env = append(r.env, env...) }
}

// WithOutputLimit bounds the output a [Result] keeps to the last n bytes of
// ansible-playbook's combined stdout and stderr; default
// [DefaultOutputLimit].
func WithOutputLimit(n int) Option { return func(r *Runner) { r.outputLimit = n } }

// WithEventRecorder emits a Warning event (reason [ReasonTaskFailed]) on the
// object for each failed task that was not ignored, and one (reason
// [ReasonTimeout]) for a run killed at its timeout. Without it no events are
// emitted.
func WithEventRecorder(rec events.EventRecorder) Option {
	return func(r *Runner) { r.recorder = rec }
}

// WithClient makes [Runner.Reconcile] write Running=True (reason
// [ReasonRunning]) to the object's status subresource, as a merge patch,
// before the playbook starts, so a long run is visible while it runs.
// Without it the Running condition is only set in memory, with the result.
func WithClient(c client.Client) Option { return func(r *Runner) { r.client = c } }

// WithClock sets the clock for condition transition times; default the
// real clock.
func WithClock(c clock.PassiveClock) Option { return func(r *Runner) { r.clock = c } }

// New returns a runner for w's kind. It fails for a watch without a kind,
// with both or neither of playbook and role, with a playbook that does not
// exist, or with a finalizer without a name.
func New(w Watch, opts ...Option) (*Runner, error) {
	if err := w.validate(); err != nil {
		return nil, err
	}
	r := &Runner{
		w: w, command: "ansible-playbook", python: DefaultPythonInterpreter,
		outputLimit: DefaultOutputLimit, clock: clock.RealClock{},
	}
	for _, o := range opts {
		o(r)
	}
	if r.outputLimit <= 0 {
		return nil, fmt.Errorf("ansible: watch %s: output limit must be positive", w.GVK)
	}
	r.sem = make(chan struct{}, w.MaxConcurrent)
	return r, nil
}

// With returns a copy of r with opts applied on top of r's. The copy shares
// r's concurrency slots, so the [Watch.MaxConcurrent] bound holds across
// both (the reconciler builder uses it to wire its client and event
// recorder).
func (r *Runner) With(opts ...Option) *Runner {
	c := *r
	c.env = append([]string(nil), r.env...)
	for _, o := range opts {
		o(&c)
	}
	return &c
}

// Watch returns the runner's watch, defaults filled in.
func (r *Runner) Watch() Watch { return r.w }

// FinalizerName returns the watch's finalizer name, or "" when it has no
// finalizer.
func (r *Runner) FinalizerName() string {
	if r.w.Finalizer == nil {
		return ""
	}
	return r.w.Finalizer.Name
}

// TaskStatus is how a task ended on a host.
type TaskStatus string

// Task statuses.
const (
	TaskOK          TaskStatus = "ok"
	TaskSkipped     TaskStatus = "skipped"
	TaskFailed      TaskStatus = "failed"
	TaskIgnored     TaskStatus = "ignored" // failed, with ignore_errors
	TaskUnreachable TaskStatus = "unreachable"
	// TaskRunning is a task that started but had not ended when the run did
	// (killed at its timeout).
	TaskRunning TaskStatus = "running"
)

// Task is one task's result on one host.
type Task struct {
	Name    string
	Action  string
	Status  TaskStatus
	Changed bool
	// Message is the failure's msg, then its stderr when it has one (each
	// bounded to 4 KiB), for failed, ignored and unreachable tasks.
	Message string
	// HTTPStatus is the API status code a kubernetes.core task failed with
	// (its result's status or error field, else the code of the API
	// server's Status quoted in its message), or 0.
	HTTPStatus int
}

// MaxTasks is how many task results a [Result] keeps (the last ones); the
// counts cover every task.
const MaxTasks = 200

// Result is what one ansible-playbook run did.
type Result struct {
	// Tasks are the last [MaxTasks] task results in the order they ended,
	// then the task still running when the run was killed, if any.
	Tasks []Task
	// Ok, Changed, Skipped, Failed, Ignored count task results (Changed
	// counts ok tasks that changed something; Failed excludes ignored
	// failures).
	Ok, Changed, Skipped, Failed, Ignored int
	// FailedTask is the first failed (not ignored) or unreachable task, or
	// nil.
	FailedTask *Task
	// ExitCode is ansible-playbook's exit status (-1 when killed).
	ExitCode int
	// TimedOut is true when the run was killed at [Watch.Timeout].
	TimedOut bool
	// Duration is the run's wall time, from start to exit (not the wait for
	// a concurrency slot).
	Duration time.Duration
	// Output is the tail of ansible-playbook's combined stdout and stderr,
	// at most the output limit ([WithOutputLimit]); OutputTruncated says
	// whether earlier output was dropped.
	Output          string
	OutputTruncated bool
}

// Succeeded reports whether the run exited 0.
func (res *Result) Succeeded() bool { return res.ExitCode == 0 && !res.TimedOut }

// changedTasks names at most n tasks that changed something.
func (res *Result) changedTasks(n int) []string {
	var out []string
	for _, t := range res.Tasks {
		if t.Changed && t.Status == TaskOK && len(out) < n {
			out = append(out, fmt.Sprintf("%q", t.Name))
		}
	}
	return out
}

// Summary says in one line what the run did: "5 tasks ok (2 changed:
// "a", "b"), 1 skipped".
func (res *Result) Summary() string {
	s := fmt.Sprintf("%d tasks ok", res.Ok)
	if res.Changed > 0 {
		s += fmt.Sprintf(" (%d changed: %s", res.Changed, strings.Join(res.changedTasks(10), ", "))
		if res.Changed > 10 {
			s += ", …"
		}
		s += ")"
	}
	if res.Skipped > 0 {
		s += fmt.Sprintf(", %d skipped", res.Skipped)
	}
	if res.Ignored > 0 {
		s += fmt.Sprintf(", %d failed and ignored", res.Ignored)
	}
	return s
}

// Vars returns the variables a run for obj gets (before the watch's and
// finalizer's Vars are laid under them):
//
//   - every field of obj's spec at the top level, keys converted with
//     [SnakeCase] recursively unless [Watch.KeepCamelCase];
//   - ansible_operator_meta: {name, namespace, uid, generation, labels,
//     annotations} of obj (namespace "" for a cluster-scoped kind);
//   - the whole object as it is (camelCase, status included) under
//     "_<group>_<kind>" (dots and dashes of the group as underscores, kind
//     in lower case), as operator-sdk passes it;
//   - ansible_python_interpreter (see [WithPythonInterpreter]).
func (r *Runner) Vars(obj client.Object) (map[string]any, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("ansible: %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	vars := map[string]any{}
	if spec, ok := u["spec"].(map[string]any); ok {
		if !r.w.KeepCamelCase {
			spec = snakeKeys(spec).(map[string]any)
		}
		for k, v := range spec {
			vars[k] = v
		}
	}
	vars["ansible_operator_meta"] = map[string]any{
		"name": obj.GetName(), "namespace": obj.GetNamespace(), "uid": string(obj.GetUID()),
		"generation": obj.GetGeneration(), "labels": obj.GetLabels(), "annotations": obj.GetAnnotations(),
	}
	vars[objectVar(r.w.GVK.Group, r.w.GVK.Kind)] = u
	if r.python != "" {
		vars["ansible_python_interpreter"] = r.python
	}
	return vars, nil
}

// Reconcile runs the watch's playbook (or role) for the live object obj and
// records the outcome on obj in memory: Running False, Successful True,
// Failed False and Ready True (reason [ReasonSuccessful]; Reconciling and
// Stalled removed) after a successful run; Running False, Successful False
// and Failed True with the failure's reason and message otherwise (the
// caller applies the returned error's outcome, which sets Ready False and
// Reconciling or Stalled). With [WithClient], Running True is written to the
// API server first.
//
// The returned error is nil after a successful run and otherwise classified
// for package outcome, by this rule:
//
//   - Terminal (Stalled, not retried until the object changes): a failed
//     task whose action is fail or assert (ansible.builtin.fail,
//     ansible.builtin.assert, or their short or ansible.legacy names: the
//     playbook said the input is invalid), a task refused by the API server with 400
//     BadRequest or 422 Invalid ([Task.HTTPStatus]: the object the spec
//     describes is invalid), and a playbook ansible-playbook refuses before running
//     (exit code 4, parse error; 5, bad options) — reason
//     [ReasonTaskFailed] or [ReasonPlaybookInvalid];
//   - Transient (retried with backoff): every other failed task (a
//     dependency not there yet, an API error, a 403, a conflict), an
//     unreachable host, a crash (reason [ReasonTaskFailed] or
//     [ReasonPlaybookError]) and a run killed at its timeout
//     ([ReasonTimeout]).
//
// The message names the failing task, its message, and what the run did
// before it ([Result.Summary]); the error wraps obj's namespace/name.
// A cancelled ctx returns ctx's error, wrapped, and sets no condition (a
// Running=True already written stays until the next run).
func (r *Runner) Reconcile(ctx context.Context, obj client.Object) (*Result, error) {
	st, err := conditions.StatusOf(obj)
	if err != nil {
		return nil, err
	}
	if r.client != nil && st.Writable() {
		patcher := conditions.NewStatusPatcher(obj)
		if err := r.set(st, ConditionRunning, metav1.ConditionTrue, ReasonRunning, "running playbook"); err != nil {
			return nil, err
		}
		if _, err := patcher.Patch(ctx, r.client, obj); err != nil {
			return nil, fmt.Errorf("ansible: %s/%s: writing Running: %w", obj.GetNamespace(), obj.GetName(), err)
		}
	}
	res, runErr := r.run(ctx, obj, r.w.Playbook, r.w.Role, nil, ActionReconcile)
	if res == nil { // never ran: cancelled, or the run could not be set up
		return nil, runErr
	}
	if !st.Writable() {
		return res, runErr
	}
	if runErr == nil {
		msg := fmt.Sprintf("last run succeeded in %s: %s", res.Duration.Round(10*time.Millisecond), res.Summary())
		err = errors.Join(
			r.set(st, ConditionRunning, metav1.ConditionFalse, ReasonSuccessful, msg),
			r.set(st, ConditionSuccessful, metav1.ConditionTrue, ReasonSuccessful, msg),
			r.set(st, ConditionFailed, metav1.ConditionFalse, ReasonSuccessful, msg),
			st.MarkReady(ReasonSuccessful, msg, conditions.WithClock(r.clock)),
		)
		return res, err
	}
	c := outcome.Classify(runErr)
	err = errors.Join(runErr,
		r.set(st, ConditionRunning, metav1.ConditionFalse, ReasonFailed, c.Message),
		r.set(st, ConditionSuccessful, metav1.ConditionFalse, ReasonFailed, c.Message),
		r.set(st, ConditionFailed, metav1.ConditionTrue, c.Reason, c.Message),
	)
	return res, err
}

// Finalize runs the watch's finalizer playbook (or role) for obj, which is
// being deleted; with no finalizer in the watch it does nothing. The error
// is classified as by [Reconcile] and writes no condition: the finalizer
// package reports it (FinalizerCleanup), and keeps the finalizer until a run
// succeeds.
func (r *Runner) Finalize(ctx context.Context, obj client.Object) (*Result, error) {
	f := r.w.Finalizer
	if f == nil {
		return &Result{}, nil
	}
	return r.run(ctx, obj, f.Playbook, f.Role, f.Vars, ActionFinalize)
}

func (r *Runner) set(st *conditions.Status, t string, s metav1.ConditionStatus, reason, msg string) error {
	return st.Set(metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg}, conditions.WithClock(r.clock))
}

// run runs one playbook for obj (waiting for a concurrency slot first) and
// returns its result and classified error. A nil result means it did not
// run.
func (r *Runner) run(ctx context.Context, obj client.Object, playbook, role string, extra map[string]any, action string) (*Result, error) {
	key := obj.GetNamespace() + "/" + obj.GetName()
	select {
	case r.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("ansible: %s: waiting for a run slot: %w", key, ctx.Err())
	}
	defer func() { <-r.sem }()

	dir, err := os.MkdirTemp("", "opkit-ansible-")
	if err != nil {
		return nil, fmt.Errorf("ansible: %s: %w", key, err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	args, env, err := r.prepare(dir, obj, playbook, role, extra)
	if err != nil {
		return nil, fmt.Errorf("ansible: %s: %w", key, err)
	}

	runCtx, cancel := context.WithTimeout(ctx, r.w.Timeout)
	defer cancel()
	cmd := exec.CommandContext(runCtx, r.command, args...)
	cmd.Env = env
	cmd.Dir = dir
	out := &tailBuffer{max: r.outputLimit}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = 5 * time.Second
	ownGroup(cmd)
	start := time.Now()
	runErr := cmd.Run()
	res := &Result{Duration: time.Since(start), ExitCode: cmd.ProcessState.ExitCode()} // -1 when killed
	res.Output, res.OutputTruncated = out.String()
	if err := res.readEvents(filepath.Join(dir, "events.jsonl")); err != nil {
		return res, outcome.Transient(ReasonPlaybookError, fmt.Errorf("ansible: %s: reading task events: %w", key, err))
	}
	if ctx.Err() != nil { // the caller gave up: not the playbook's fault
		return nil, fmt.Errorf("ansible: %s: %w", key, ctx.Err())
	}
	if runCtx.Err() != nil {
		res.TimedOut = true
	}
	var execErr *exec.ExitError
	if runErr != nil && !errors.As(runErr, &execErr) && !res.TimedOut {
		return nil, fmt.Errorf("ansible: %s: starting %s: %w", key, r.command, runErr)
	}
	err = r.classify(res, key)
	r.emit(obj, res, action)
	return res, err
}

// prepare writes the run's files into dir and returns the arguments and
// environment of ansible-playbook.
func (r *Runner) prepare(dir string, obj client.Object, playbook, role string, extra map[string]any) ([]string, []string, error) {
	vars := map[string]any{}
	for _, layer := range []map[string]any{r.w.Vars, extra} {
		for k, v := range layer {
			vars[k] = v
		}
	}
	own, err := r.Vars(obj)
	if err != nil {
		return nil, nil, err
	}
	for k, v := range own {
		vars[k] = v
	}
	data, err := json.Marshal(vars)
	if err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "vars.json"), data, 0o600); err != nil {
		return nil, nil, err
	}
	cb := filepath.Join(dir, "callback")
	src, err := callbackFS.ReadFile("callback/opkit_events.py")
	if err != nil {
		return nil, nil, err
	}
	if err := os.Mkdir(cb, 0o700); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(filepath.Join(cb, "opkit_events.py"), src, 0o600); err != nil {
		return nil, nil, err
	}
	// A module's payload goes to the system temporary directory, and a
	// module killed at the timeout leaves it there: the run gets one of
	// its own inside dir, removed with it.
	tmp := filepath.Join(dir, "system-tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return nil, nil, err
	}
	env := append(os.Environ(),
		"TMPDIR="+tmp,
		"OPKIT_ANSIBLE_EVENTS="+filepath.Join(dir, "events.jsonl"),
		"ANSIBLE_CALLBACK_PLUGINS="+joinPath(cb, os.Getenv("ANSIBLE_CALLBACK_PLUGINS")),
		"ANSIBLE_CALLBACKS_ENABLED="+joinList("opkit_events", os.Getenv("ANSIBLE_CALLBACKS_ENABLED")),
		"ANSIBLE_NOCOLOR=1", "ANSIBLE_FORCE_COLOR=0",
		"ANSIBLE_LOCALHOST_WARNING=False", "ANSIBLE_INVENTORY_UNPARSED_WARNING=False",
		"ANSIBLE_RETRY_FILES_ENABLED=False",
		"ANSIBLE_LOCAL_TEMP="+filepath.Join(dir, "tmp"),
		"ANSIBLE_REMOTE_TEMP="+filepath.Join(dir, "remote-tmp"), // not ~/.ansible: HOME may be read-only
	)
	if r.kubeconfig != "" {
		env = append(env, "K8S_AUTH_KUBECONFIG="+r.kubeconfig)
	}
	if role != "" {
		name := role
		if strings.ContainsRune(role, os.PathSeparator) {
			abs, err := filepath.Abs(role)
			if err != nil {
				return nil, nil, err
			}
			name = filepath.Base(abs)
			env = append(env, "ANSIBLE_ROLES_PATH="+joinPath(filepath.Dir(abs), os.Getenv("ANSIBLE_ROLES_PATH")))
		}
		playbook = filepath.Join(dir, "role.yml")
		pb := fmt.Sprintf("- hosts: localhost\n  gather_facts: false\n  roles:\n    - role: %q\n", name)
		if err := os.WriteFile(playbook, []byte(pb), 0o600); err != nil {
			return nil, nil, err
		}
	} else if playbook, err = filepath.Abs(playbook); err != nil {
		return nil, nil, err
	}
	env = append(env, r.env...)
	args := []string{"-i", "localhost,", "-c", "local", "-e", "@" + filepath.Join(dir, "vars.json"), playbook}
	return args, env, nil
}

func joinPath(first, rest string) string {
	if rest == "" {
		return first
	}
	return first + string(os.PathListSeparator) + rest
}

func joinList(first, rest string) string {
	if rest == "" {
		return first
	}
	return first + "," + rest
}

// event is one line the opkit_events callback plugin writes.
type event struct {
	Event        string          `json:"event"`
	Task         string          `json:"task"`
	Action       string          `json:"action"`
	Changed      bool            `json:"changed"`
	IgnoreErrors bool            `json:"ignore_errors"`
	Msg          string          `json:"msg"`
	Status       json.RawMessage `json:"status"`
	Error        json.RawMessage `json:"error"`
	Stderr       string          `json:"stderr"`
}

// readEvents fills res from the callback plugin's events file (absent when
// ansible-playbook failed before loading plugins).
func (res *Result) readEvents(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var running *Task
	for sc.Scan() {
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			continue // a line cut by a kill at the timeout
		}
		t := Task{Name: ev.Task, Action: ev.Action, Changed: ev.Changed}
		switch ev.Event {
		case "task_start":
			running = &Task{Name: ev.Task, Action: ev.Action, Status: TaskRunning}
			continue
		case "ok":
			t.Status = TaskOK
			res.Ok++
			if ev.Changed {
				res.Changed++
			}
		case "skipped":
			t.Status = TaskSkipped
			res.Skipped++
		case "failed":
			t.Status, t.Message, t.HTTPStatus = TaskFailed, ev.Msg, httpStatus(ev.Status, ev.Error)
			if t.HTTPStatus == 0 {
				t.HTTPStatus = statusInMessage(ev.Msg)
			}
			if se := strings.TrimSpace(ev.Stderr); se != "" && !strings.Contains(t.Message, se) {
				t.Message += ": " + se
			}
			if ev.IgnoreErrors {
				t.Status = TaskIgnored
				res.Ignored++
			} else {
				res.Failed++
			}
		case "unreachable":
			t.Status, t.Message = TaskUnreachable, ev.Msg
			res.Failed++
		default:
			continue
		}
		running = nil
		res.Tasks = append(res.Tasks, t)
		if (t.Status == TaskFailed || t.Status == TaskUnreachable) && res.FailedTask == nil {
			ft := t
			res.FailedTask = &ft
		}
		if len(res.Tasks) > MaxTasks {
			res.Tasks = append(res.Tasks[:0], res.Tasks[len(res.Tasks)-MaxTasks:]...)
		}
	}
	if running != nil {
		res.Tasks = append(res.Tasks, *running)
	}
	return sc.Err()
}

// httpStatus reads an API status code from a kubernetes.core failure's
// status or error field (a number, or a string holding one).
func httpStatus(fields ...json.RawMessage) int {
	for _, f := range fields {
		var n int
		if json.Unmarshal(f, &n) == nil && n >= 100 && n < 600 {
			return n
		}
		var s string
		if json.Unmarshal(f, &s) == nil {
			if _, err := fmt.Sscanf(s, "%d", &n); err == nil && n >= 100 && n < 600 {
				return n
			}
		}
	}
	return 0
}

// apiStatusCode finds the code of a metav1.Status the API server answered
// with, as kubernetes.core quotes it in a failure's message
// ("Failed to create object: b'{\"kind\":\"Status\",…,\"code\":400}'").
var apiStatusCode = regexp.MustCompile(`"kind":\s*"Status".*"code":\s*([1-5][0-9][0-9])\b`)

// statusInMessage returns the API status code quoted in msg, or 0.
func statusInMessage(msg string) int {
	m := apiStatusCode.FindStringSubmatch(msg)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// classify turns a finished run into nil or an outcome-classified error.
func (r *Runner) classify(res *Result, key string) error {
	did := res.Summary()
	switch {
	case res.TimedOut:
		msg := fmt.Sprintf("playbook timed out after %s", r.w.Timeout)
		if n := len(res.Tasks); n > 0 && res.Tasks[n-1].Status == TaskRunning {
			msg += fmt.Sprintf(" in task %q", res.Tasks[n-1].Name)
		}
		return outcome.Transient(ReasonTimeout, fmt.Errorf("ansible: %s: %s (before: %s)", key, msg, did))
	case res.ExitCode == 0:
		return nil
	case res.FailedTask != nil:
		t := res.FailedTask
		err := fmt.Errorf("ansible: %s: task %q failed: %s (before it: %s)", key, t.Name, strings.TrimSpace(t.Message), did)
		if t.Status == TaskUnreachable {
			return outcome.Transient(ReasonPlaybookError, err)
		}
		if isTerminalAction(t.Action) || t.HTTPStatus == 400 || t.HTTPStatus == 422 {
			return outcome.Terminal(ReasonTaskFailed, err)
		}
		return outcome.Transient(ReasonTaskFailed, err)
	case res.ExitCode == 4 || res.ExitCode == 5:
		return outcome.Terminal(ReasonPlaybookInvalid, fmt.Errorf("ansible: %s: ansible-playbook exited %d: %s", key, res.ExitCode, lastLines(res.Output, 6)))
	default:
		return outcome.Transient(ReasonPlaybookError, fmt.Errorf("ansible: %s: ansible-playbook exited %d (%s): %s", key, res.ExitCode, did, lastLines(res.Output, 6)))
	}
}

func isTerminalAction(a string) bool {
	for _, t := range terminalActions {
		if a == t {
			return true
		}
	}
	return false
}

// lastLines returns the last n non-empty lines of s, joined by " | ".
func lastLines(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// emit sends the run's Warning events.
func (r *Runner) emit(obj client.Object, res *Result, action string) {
	if r.recorder == nil {
		return
	}
	for _, t := range res.Tasks {
		if t.Status == TaskFailed || t.Status == TaskUnreachable {
			r.recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonTaskFailed, action,
				"task %q (%s) failed: %s", t.Name, t.Action, clip(strings.TrimSpace(t.Message), 800))
		}
	}
	if res.TimedOut {
		r.recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonTimeout, action,
			"playbook killed after %s: %s", r.w.Timeout, res.Summary())
	}
}

// clip bounds s to n bytes (an event's note may hold 1 KiB).
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + " …"
}
