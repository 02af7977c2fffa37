package finalizer_test

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/finalizer"
	"github.com/opkit/opkit/testenv"
)

const gadgets = "gadgets.finalizer.test.opkit.dev"

// newRichGadget creates a Gadget whose spec holds fields the Go type Gadget
// does not know (note, color), as another client would write them.
func newRichGadget(t testing.TB, ns, name string, spec map[string]any, finalizers ...string) *Gadget {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gadgetGV.String(), "kind": "Gadget",
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec":     spec,
	}}
	u.SetFinalizers(finalizers)
	if err := env.Client.Create(testCtx(t), u); err != nil {
		t.Fatal(err)
	}
	return &Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

// on counts the requests for resource, whatever their verb (the counted
// client's discovery requests are not among them).
func on(counter *testenv.RequestCounter, resource string) int {
	n := 0
	for r, c := range counter.Snapshot() {
		if r.Resource == resource {
			n += c
		}
	}
	return n
}

func getUnstructured(t testing.TB, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gadgetGV.WithKind("Gadget"))
	if err := env.Client.Get(testCtx(t), types.NamespacedName{Namespace: ns, Name: name}, u); err != nil {
		t.Fatal(err)
	}
	return u
}

func releaseFinalizers(t testing.TB, u *unstructured.Unstructured) {
	t.Helper()
	u.SetFinalizers(nil)
	if err := env.Client.Update(testCtx(t), u); err != nil {
		t.Fatal(err)
	}
}

// A step that edits the object it is given: what it changes besides
// conditions must not be written (guarantee 10), on either removal path.
func meddlingStep(_ context.Context, g *Gadget) (finalizer.StepResult, error) {
	if g.Labels == nil {
		g.Labels = map[string]string{}
	}
	g.Labels["meddled"] = "yes"
	g.Spec.Size = 99
	return finalizer.Done(), nil
}

// meddlingFinalizer returns a namespace, a context and a Finalizer of
// Gadgets with meddlingStep on a client whose requests are counted.
func meddlingFinalizer(t *testing.T) (string, context.Context, *finalizer.Finalizer[*Gadget], *testenv.RequestCounter) {
	t.Helper()
	c, counter := countedClient(t)
	f, err := finalizer.New[*Gadget](c, ours, finalizer.WithStep("meddle", meddlingStep))
	if err != nil {
		t.Fatal(err)
	}
	return env.Namespace(t), testCtx(t), f, counter
}

func TestLastFinalizerIsRemovedByOneUpdateThatDeletes(t *testing.T) {
	ns, ctx, f, counter := meddlingFinalizer(t)
	g := newRichGadget(t, ns, "last", map[string]any{"size": int64(3), "note": "the user's"}, ours)
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gadgetGV.WithKind("GadgetList"))
	w, err := wc.Watch(ctx, list, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	deleteObj(t, g)
	view := get(t, g)
	counter.Reset()

	res, err := f.Reconcile(ctx, view)
	if err != nil || !res.Finalized || res.Gone || !res.Deleting {
		t.Fatalf("%+v, %v", res, err)
	}
	if counter.Writes() != 1 || counter.Count("update", gadgets) != 1 || on(counter, gadgets) != 1 {
		t.Fatalf("want exactly one update, got\n%s", counter)
	}
	if !isGone(t, g) {
		t.Fatal("the object outlived the removal of its only finalizer")
	}
	// The API server deleted the stored object without storing the update:
	// the DELETED event carries the object as it was stored, the field the
	// Go type lacks included, and nothing the step changed.
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev := <-w.ResultChan():
			if ev.Type != watch.Deleted {
				continue
			}
			last := ev.Object.(*unstructured.Unstructured)
			size, _, _ := unstructured.NestedInt64(last.Object, "spec", "size")
			note, _, _ := unstructured.NestedString(last.Object, "spec", "note")
			if last.GetLabels()["meddled"] != "" || size != 3 || note != "the user's" {
				t.Fatalf("last state: labels %v, spec %v; want no label, size 3 and the user's note", last.GetLabels(), last.Object["spec"])
			}
			// A later call for the same object sends nothing.
			counter.Reset()
			if res, err := f.Reconcile(ctx, view); err != nil || !res.Deleting || counter.Total() != 0 {
				t.Fatalf("%+v, %v, requests:\n%s", res, err, counter)
			}
			return
		case <-timeout:
			t.Fatal("no DELETED event")
		}
	}
}

func TestRemovalKeepsUnknownFieldsWhileOtherFinalizersRemain(t *testing.T) {
	ns, ctx, f, counter := meddlingFinalizer(t)
	const other = "other.example.com/keep"
	g := newRichGadget(t, ns, "shared", map[string]any{"size": int64(3), "note": "the user's"}, other, ours)
	deleteObj(t, g)
	view := get(t, g)
	counter.Reset()
	if res, err := f.Reconcile(ctx, view); err != nil || !res.Finalized {
		t.Fatalf("%+v, %v", res, err)
	}
	if counter.Writes() != 1 || counter.Count("patch", gadgets) != 1 {
		t.Fatalf("want exactly one patch, got\n%s", counter)
	}
	u := getUnstructured(t, ns, "shared")
	note, _, _ := unstructured.NestedString(u.Object, "spec", "note")
	size, _, _ := unstructured.NestedInt64(u.Object, "spec", "size")
	if !slices.Equal(u.GetFinalizers(), []string{other}) || note != "the user's" || size != 3 || u.GetLabels()["meddled"] != "" {
		t.Fatalf("after removal: finalizers %v, spec %v, labels %v", u.GetFinalizers(), u.Object["spec"], u.GetLabels())
	}
	releaseFinalizers(t, u)
}

func TestStaleViewOfTheLastFinalizerIsRetriedAsPatch(t *testing.T) {
	ns, ctx, f, counter := meddlingFinalizer(t)
	g := newRichGadget(t, ns, "raced", map[string]any{"size": int64(3), "note": "the user's"}, ours)
	deleteObj(t, g)
	stale := get(t, g)
	// Another writer edits the object after our read (no finalizer can be
	// added to an object being deleted).
	u := getUnstructured(t, ns, "raced")
	u.SetLabels(map[string]string{"theirs": "1"})
	if err := unstructured.SetNestedField(u.Object, "edited", "spec", "note"); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Update(ctx, u); err != nil {
		t.Fatal(err)
	}
	counter.Reset()
	if res, err := f.Reconcile(ctx, stale); err != nil || !res.Finalized {
		t.Fatalf("%+v, %v", res, err)
	}
	// The update lost the race (409), the object was re-read and patched.
	if counter.Count("update", gadgets) != 1 || counter.Count("get", gadgets) != 1 || counter.Count("patch", gadgets) != 1 || on(counter, gadgets) != 3 {
		t.Fatalf("want update (refused), get, patch; got\n%s", counter)
	}
	if !isGone(t, g) {
		t.Fatal("the object outlived its only finalizer")
	}
}

func TestRefusedUpdateFallsBackToPatchFromThenOn(t *testing.T) {
	ns, ctx, f, counter := meddlingFinalizer(t)
	// The CRD refuses an update that drops spec.color, which Gadget lacks.
	first := newRichGadget(t, ns, "first", map[string]any{"color": "red"}, ours)
	second := newRichGadget(t, ns, "second", map[string]any{"color": "blue"}, ours)
	deleteObj(t, first)
	deleteObj(t, second)
	view := get(t, first)
	counter.Reset()
	if res, err := f.Reconcile(ctx, view); err != nil || !res.Finalized {
		t.Fatalf("%+v, %v", res, err)
	}
	if counter.Count("update", gadgets) != 1 || counter.Count("patch", gadgets) != 1 || on(counter, gadgets) != 2 {
		t.Fatalf("want update (refused), patch; got\n%s", counter)
	}
	if !isGone(t, first) {
		t.Fatal("first outlived its only finalizer")
	}
	view = get(t, second)
	counter.Reset()
	if res, err := f.Reconcile(ctx, view); err != nil || !res.Finalized {
		t.Fatalf("%+v, %v", res, err)
	}
	if counter.Count("patch", gadgets) != 1 || on(counter, gadgets) != 1 {
		t.Fatalf("after a refusal, want one patch only; got\n%s", counter)
	}
	if !isGone(t, second) {
		t.Fatal("second outlived its only finalizer")
	}
}

func TestMetadataOnlyObjectsArePatched(t *testing.T) {
	ns := env.Namespace(t)
	ctx := testCtx(t)
	c, counter := countedClient(t)
	f, err := finalizer.New[*metav1.PartialObjectMetadata](c, ours,
		finalizer.WithStep("noop", func(context.Context, *metav1.PartialObjectMetadata) (finalizer.StepResult, error) {
			return finalizer.Done(), nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "meta", Finalizers: []string{ours}}}
	if err := env.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	deleteObj(t, cm)
	view := &metav1.PartialObjectMetadata{}
	view.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cm), view); err != nil {
		t.Fatal(err)
	}
	counter.Reset()
	if res, err := f.Reconcile(ctx, view); err != nil || !res.Finalized {
		t.Fatalf("%+v, %v", res, err)
	}
	if counter.Count("patch", "configmaps") != 1 || on(counter, "configmaps") != 1 {
		t.Fatalf("want one patch, got\n%s", counter)
	}
	if !isGone(t, cm) {
		t.Fatal("the object outlived its only finalizer")
	}
}
