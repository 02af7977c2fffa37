package chaos_test

// Throttling: API Priority and Fairness gives the operator's user a
// priority level of its own with the smallest share of the server's
// concurrency, nothing lent or borrowed, one queue of one request; the
// operator, 16 reconciles at once over 40 new WebApps, is queued and
// rejected with 429 (Retry-After). client-go waits Retry-After and retries
// (up to 10 times), the reflector backs off, controller-runtime requeues
// with its rate limiter; the operator must converge, without a hot loop.
// The 429s are counted as the operator received them
// (chaos.CountResponses) and as the API server rejected them
// (apiserver_flowcontrol_rejected_requests_total); a run with none fails.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	webappv1 "github.com/opkit/opkit/examples/webapp/api/v1"
	"github.com/opkit/opkit/examples/webapp/controller"
	"github.com/opkit/opkit/examples/webapp/registry"
	"github.com/opkit/opkit/testenv/chaos"
)

// operatorUser creates a user outside system:masters (whose requests APF
// exempts) bound to cluster-admin, so a FlowSchema can single the
// operator's requests out. It returns the user's config and name.
func operatorUser(t *testing.T, ns string) (*rest.Config, string) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	name := "chaos-operator-" + ns
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
	}
	if err := env.Client.Create(ctx, crb); err != nil {
		t.Fatal(err)
	}
	e := env
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := e.Client.Delete(ctx, crb); err != nil && !apierrors.IsNotFound(err) && e.Envtest != nil {
			t.Errorf("delete %s: %v", name, err)
		}
	})
	u, err := env.Envtest.AddUser(envtest.User{Name: name}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return u.Config(), name
}

// throttle puts user's requests in a priority level of their own: one
// nominal seat share (of the server's --max-requests-inflight +
// --max-mutating-requests-inflight), nothing lent or borrowed, one queue of
// one request; a request that finds the seats taken and the queue full is
// rejected with 429. It returns the priority level's name and a function
// that removes both objects (the user is then served by global-default
// again), which the test's cleanup also calls.
func throttle(t *testing.T, user string) (string, func()) {
	t.Helper()
	ctx := ctxFor(t, time.Minute)
	name := user
	plc := &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
			Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
				NominalConcurrencyShares: ptr.To[int32](1),
				LendablePercent:          ptr.To[int32](0),
				BorrowingLimitPercent:    ptr.To[int32](0),
				LimitResponse: flowcontrolv1.LimitResponse{
					Type:    flowcontrolv1.LimitResponseTypeQueue,
					Queuing: &flowcontrolv1.QueuingConfiguration{Queues: 1, HandSize: 1, QueueLengthLimit: 1},
				},
			},
		},
	}
	fs := &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: name},
			MatchingPrecedence:         500,
			DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects: []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: user}}},
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{
					Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}, ClusterScope: true, Namespaces: []string{"*"},
				}},
				NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}},
			}},
		},
	}
	for _, o := range []client.Object{plc, fs} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	e := env
	var once sync.Once
	undo := func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for _, o := range []client.Object{fs, plc} {
				if err := e.Client.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) && e.Envtest != nil {
					t.Errorf("delete %T %s: %v", o, name, err)
				}
			}
		})
	}
	t.Cleanup(undo)
	// The API server's APF controller takes the FlowSchema into effect and
	// says so in its status (Dangling=False: its priority level exists).
	waitFor(t, 30*time.Second, "FlowSchema "+name+" in effect", func() (bool, error) {
		var got flowcontrolv1.FlowSchema
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, &got); err != nil {
			return false, err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == flowcontrolv1.FlowSchemaConditionDangling {
				return c.Status == flowcontrolv1.ConditionFalse, nil
			}
		}
		return false, nil
	})
	return name, undo
}

// apfRejected returns how many requests the API server's APF rejected at
// priority level pl (apiserver_flowcontrol_rejected_requests_total), by
// reason (queue-full, time-out, concurrency-limit, cancelled).
func apfRejected(t *testing.T, pl string) map[string]float64 {
	t.Helper()
	hc, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, 30*time.Second)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(env.Config.Host, "/")+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse the API server's metrics: %v", err)
	}
	out := map[string]float64{}
	if f := families["apiserver_flowcontrol_rejected_requests_total"]; f != nil {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["priority_level"] == pl {
				out[labels["reason"]] += m.GetCounter().GetValue()
			}
		}
	}
	return out
}

func total(m map[string]float64) float64 {
	n := 0.0
	for _, v := range m {
		n += v
	}
	return n
}

// TestThrottledByPriorityAndFairness runs the operator as a user whose
// requests APF queues and rejects, creates and updates WebApps in a burst,
// and requires convergence, no hot loop and at least one 429 seen both by
// the operator and by the API server.
func TestThrottledByPriorityAndFairness(t *testing.T) {
	p := currentProfile()
	leaks := leakOptions()
	ns := env.Namespace(t)
	panics0 := panics(t)
	userCfg, user := operatorUser(t, ns)
	pl, unthrottle := throttle(t, user)
	rejected0 := apfRejected(t, pl)

	cfg, responses := chaos.CountResponses(userCfg)
	cfg.QPS, cfg.Burst = 200, 400
	reg := registry.New()
	mon := chaos.NewReconcileMonitor()
	fc := chaos.NewFinalizerChecker(controller.FinalizerName, chaos.WithCleanupProbe(func(k types.NamespacedName) bool {
		_, routed := reg.Lookup(k.String())
		return !routed
	}))
	stopWatch := watchFinalizers(t, ns, fc)
	op := startOperator(t, ns, opConfig{cfg: cfg, registry: reg, monitor: mon, concurrency: 16})
	ld := newLoad(ns, 429)
	ctx := ctxFor(t, 5*time.Minute)

	// A burst: 2×objects WebApps created at once by 8 writers, then the
	// steady load (updates, deletes, creates) for loadBefore.
	n := 2 * p.objects
	t0 := time.Now()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n / 8 {
				ld.step(ctx, n)
			}
		}()
	}
	wg.Wait()
	lctx, stopLoad := context.WithTimeout(ctx, p.loadBefore)
	ld.run(lctx, p)
	stopLoad()
	// How many requests find the priority level's 3 seats taken depends on
	// the machine's pace: while the operator has received no 429, burst
	// again (every live WebApp updated at once, up to 5 times), so a fast
	// or a loaded machine still gets there. A run without any 429 fails.
	extra := 0
	for ; extra < 5 && responses.Status(http.StatusTooManyRequests) == 0; extra++ {
		ld.mu.Lock()
		live := ld.live()
		ld.mu.Unlock()
		ld.updateEach(ctx, live, 8)
		time.Sleep(2 * time.Second)
	}
	loadTime := time.Since(t0)
	ops := ld.ok.Load() + ld.fail.Load()
	mk := mon.Mark()
	recovery, v := ld.waitConverged(t, reg, p.converge)
	got429 := responses.Status(http.StatusTooManyRequests)
	rejected := apfRejected(t, pl)
	for k, v := range rejected0 {
		rejected[k] -= v
	}
	ld.mu.Lock()
	objects := len(ld.live())
	ld.mu.Unlock()
	logTable(t, []row{{
		test: "apf", fault: fmt.Sprintf("APF: 1 seat share, 1 queue × 1; %d reconcilers", 16),
		objects: objects, ops: ops, opsPerSec: float64(ops) / loadTime.Seconds(),
		injected: fmt.Sprintf("%d×429 (server: %.0f rejected)", got429, total(rejected)),
		lost:     len(v.lost), duplicates: len(v.duplicates), recovery: recovery + loadTime, ready: v.ready, maxReconciles: maxOf(mon.Since(chaos.Mark{})),
	}})
	t.Logf("429s received by the operator: %d; rejected by APF at %s: %v; extra bursts %d; converged %.1fs after the load ended; reconciles %d (%d after the load)",
		got429, pl, rejected, extra, recovery.Seconds(), mon.Total(), sumOf(mon.Since(mk)))
	if got429 == 0 || total(rejected) == 0 {
		t.Errorf("APF rejected nothing the operator sent (429s seen %d, server rejections %v): the test did not exercise throttling\n%s", got429, rejected, responses)
	}
	if len(v.duplicates) > 0 || len(v.lost) > 0 {
		t.Errorf("lost %v, duplicates %v", v.lost, v.duplicates)
	}
	// Still throttled: a converged operator must be quiet, and idempotent.
	if err := checkQuiet(t, mon, ns, p.quietWindow, p.maxQuiet); err != nil {
		t.Error(err)
	}
	if live := ld.live(); len(live) > 0 {
		if err := idempotentNow(ctx, op, mon, ns, live[0]); err != nil {
			t.Error(err)
		}
	}
	if err := errors.Join(mon.Check(), fc.Check()); err != nil {
		t.Error(err)
	}
	if d := panics(t) - panics0; d != 0 {
		t.Errorf("controller-runtime recovered %v reconcile panics", d)
	}
	// Deleting every WebApp goes through the finalizer, still throttled.
	if err := env.Client.DeleteAllOf(ctx, &webappv1.WebApp{}, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p.converge, "every WebApp deleted through its finalizer", func() (bool, error) {
		var list webappv1.WebAppList
		err := env.Client.List(ctx, &list, client.InNamespace(ns))
		return err == nil && len(list.Items) == 0, err
	})
	if fc.Finalized() == 0 {
		t.Error("no finalizer removal seen")
	}
	unthrottle()
	op.stop()
	stopWatch()
	goleak.VerifyNone(t, leaks...)
}

func sumOf(m map[types.NamespacedName]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
