package ensure_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/ensure"
)

// TestTypedDeclarationsAreWrittenTyped: a typed declaration of a built-in
// kind is created and patched through a typed object (the client asks the
// API server for the answer in protobuf); an unstructured declaration
// still goes unstructured. Either way the Change carries the object as the
// API server answered, without managedFields: the same tree a read of it
// right after returns.
func TestTypedDeclarationsAreWrittenTyped(t *testing.T) {
	ns := env.Namespace(t)
	ctx := testCtx(t)
	h := newHarness(t, ns)
	owner := newOwner(t, ns, "app")
	var writes []string
	c := &recordingWrites{Client: h.client, writes: &writes}
	e, err := ensure.New(c, "webapp-operator", ensure.WithAPIReader(h.direct))
	if err != nil {
		t.Fatal(err)
	}
	dep, _, cm := children("nginx:1.27")
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cm)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetName("web-unstructured")
	cs, err := e.Ensure(ctx, owner, dep, u)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"create web *v1.Deployment", "create web-unstructured *unstructured.Unstructured"}
	if !reflect.DeepEqual(writes, want) {
		t.Fatalf("writes %q, want %q", writes, want)
	}
	for _, ch := range cs {
		if ch.Action != ensure.Created || ch.Object == nil {
			t.Fatalf("change %+v: want Created with the object", ch)
		}
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(ch.GVK)
		if err := h.direct.Get(ctx, client.ObjectKey{Namespace: ns, Name: ch.Name}, live); err != nil {
			t.Fatal(err)
		}
		if ch.Object.GetManagedFields() != nil {
			t.Errorf("%s: the Change's object has managedFields", ch.Name)
		}
		live.SetManagedFields(nil)
		if !reflect.DeepEqual(ch.Object.Object, live.Object) {
			t.Errorf("%s: the Change's object is not what the API server holds\n got: %v\nwant: %v", ch.Name, ch.Object.Object, live.Object)
		}
	}
	h.waitCached(t, inNS(ns, dep)...)
	writes = nil
	dep.Spec.Template.Spec.Containers[0].Image = "nginx:1.28"
	cs, err = e.Ensure(ctx, owner, dep, u)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"patch web *v1.Deployment"}; !reflect.DeepEqual(writes, want) {
		t.Fatalf("writes %q, want %q", writes, want)
	}
	live := &appsv1.Deployment{}
	if err := h.direct.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, live); err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 || cs[0].Action != ensure.Updated || cs[0].Object == nil || cs[1].Action != ensure.Unchanged ||
		cs[0].Object.GetResourceVersion() != live.ResourceVersion || cs[0].Object.GetKind() != "Deployment" {
		t.Fatalf("changes %+v: want the Deployment Updated with the object at resourceVersion %s, the ConfigMap Unchanged", cs, live.ResourceVersion)
	}
	img, _, _ := unstructured.NestedSlice(cs[0].Object.Object, "spec", "template", "spec", "containers")
	if len(img) != 1 || img[0].(map[string]any)["image"] != "nginx:1.28" {
		t.Fatalf("patched object's containers: %v", img)
	}
}

// recordingWrites records the name and Go type of each object created or
// patched through it.
type recordingWrites struct {
	client.Client
	writes *[]string
}

func (r *recordingWrites) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	*r.writes = append(*r.writes, fmt.Sprintf("create %s %T", obj.GetName(), obj))
	return r.Client.Create(ctx, obj, opts...)
}

func (r *recordingWrites) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	*r.writes = append(*r.writes, fmt.Sprintf("patch %s %T", obj.GetName(), obj))
	return r.Client.Patch(ctx, obj, patch, opts...)
}
