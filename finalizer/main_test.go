package finalizer_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/opkit/opkit/finalizer"
	"github.com/opkit/opkit/testenv"
)

var env *testenv.Env

// controller-runtime's manager.GetEventRecorder result must be accepted as is.
var _ events.EventRecorder = recorder.EventRecorder(nil)

var gadgetGV = schema.GroupVersion{Group: "finalizer.test.opkit.dev", Version: "v1"}

// Gadget is a test CRD (testdata/crds) with status conditions.
type Gadget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              GadgetSpec   `json:"spec,omitempty"`
	Status            GadgetStatus `json:"status,omitempty"`
}

type GadgetSpec struct {
	Size int64 `json:"size,omitempty"`
}

type GadgetStatus struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

func (g *Gadget) DeepCopy() *Gadget {
	out := *g
	om := g.ObjectMeta
	om.DeepCopyInto(&out.ObjectMeta)
	out.Status.Conditions = slices.Clone(g.Status.Conditions)
	for i := range out.Status.Conditions {
		g.Status.Conditions[i].DeepCopyInto(&out.Status.Conditions[i])
	}
	return &out
}

func (g *Gadget) DeepCopyObject() runtime.Object { return g.DeepCopy() }

// GetConditions and SetConditions make Gadget a conditions.Accessor.
func (g *Gadget) GetConditions() []metav1.Condition  { return g.Status.Conditions }
func (g *Gadget) SetConditions(c []metav1.Condition) { g.Status.Conditions = c }

type GadgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Gadget `json:"items"`
}

func (l *GadgetList) DeepCopyObject() runtime.Object {
	out := *l
	lm := l.ListMeta
	lm.DeepCopyInto(&out.ListMeta)
	out.Items = make([]Gadget, len(l.Items))
	for i := range l.Items {
		out.Items[i] = *l.Items[i].DeepCopy()
	}
	return &out
}

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	s.AddKnownTypes(gadgetGV, &Gadget{}, &GadgetList{})
	metav1.AddToGroupVersion(s, gadgetGV)
	os.Exit(testenv.RunMain(m, &env, testenv.WithScheme(s), testenv.WithCRDPaths("testdata/crds")))
}

func testCtx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// eventually polls cond with testenv.WaitForEvery (every 50ms).
func eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	testenv.WaitForEvery(t, 50*time.Millisecond, timeout, what, cond)
}

// countedClient is a direct client whose requests are counted.
func countedClient(t testing.TB) (client.Client, *testenv.RequestCounter) {
	t.Helper()
	cfg, counter := testenv.CountRequests(env.Config)
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	counter.Reset()
	return c, counter
}

// eventRecorder returns an events.k8s.io/v1 recorder writing to the test API server.
func eventRecorder(t testing.TB) events.EventRecorder {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	ctx, cancel := context.WithCancel(context.Background())
	if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); b.Shutdown() })
	return b.NewRecorder(env.Scheme, "opkit-finalizer-test")
}

// waitForEvent polls events.k8s.io/v1 Events in ns until one about name has reason.
func waitForEvent(t testing.TB, ns, name, reason, noteContains string) eventsv1.Event {
	t.Helper()
	var found eventsv1.Event
	eventually(t, 30*time.Second, "event "+reason+" for "+name, func() (bool, error) {
		var list eventsv1.EventList
		if err := env.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if e.Regarding.Name == name && e.Reason == reason && e.Type == corev1.EventTypeWarning && strings.Contains(e.Note, noteContains) {
				found = e
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

func newGadget(t testing.TB, ns, name string, finalizers ...string) *Gadget {
	t.Helper()
	g := &Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: finalizers}}
	if err := env.Client.Create(testCtx(t), g); err != nil {
		t.Fatal(err)
	}
	return g
}

func get[T client.Object](t testing.TB, obj T) T {
	t.Helper()
	if err := env.Client.Get(testCtx(t), client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

func isGone(t testing.TB, obj client.Object) bool {
	t.Helper()
	cp := obj.DeepCopyObject().(client.Object)
	err := env.Client.Get(testCtx(t), client.ObjectKeyFromObject(obj), cp)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return apierrors.IsNotFound(err)
}

func deleteObj(t testing.TB, obj client.Object) {
	t.Helper()
	if err := env.Client.Delete(testCtx(t), obj); err != nil {
		t.Fatal(err)
	}
}

// steps counts invocations and Done results per step, safely across goroutines.
type steps struct {
	mu    sync.Mutex
	calls map[string]int
	dones map[string]int
}

func newSteps() *steps { return &steps{calls: map[string]int{}, dones: map[string]int{}} }

func (s *steps) record(name string, r finalizer.StepResult, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[name]++
	if err == nil && r.Done {
		s.dones[name]++
	}
}

func (s *steps) get(name string) (calls, dones int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[name], s.dones[name]
}

// step returns a step named name whose behaviour fn decides (given the call number, from 1).
func step[T client.Object](s *steps, name string, fn func(call int) (finalizer.StepResult, error), opts ...finalizer.StepOption) finalizer.Option {
	return finalizer.WithStep(name, func(_ context.Context, _ T) (finalizer.StepResult, error) {
		c, _ := s.get(name)
		r, err := fn(c + 1)
		s.record(name, r, err)
		return r, err
	}, opts...)
}

func always(r finalizer.StepResult, err error) func(int) (finalizer.StepResult, error) {
	return func(int) (finalizer.StepResult, error) { return r, err }
}

func findCondition(g *Gadget, typ string) *metav1.Condition {
	for i := range g.Status.Conditions {
		if g.Status.Conditions[i].Type == typ {
			return &g.Status.Conditions[i]
		}
	}
	return nil
}
