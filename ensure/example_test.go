package ensure_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/opkit/opkit/ensure"
)

func ExampleChangeSet() {
	cs := ensure.ChangeSet{
		{GVK: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, Namespace: "shop", Name: "web", Action: ensure.Updated},
		{GVK: schema.GroupVersionKind{Version: "v1", Kind: "Service"}, Namespace: "shop", Name: "web", Action: ensure.Unchanged},
		{GVK: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Namespace: "shop", Name: "old-config", Action: ensure.Deleted},
	}
	fmt.Println(cs.Summary())
	fmt.Println(cs.Changed())
	for _, c := range cs {
		if c.Action != ensure.Unchanged {
			fmt.Println(c)
		}
	}
	// Output:
	// created 0, updated 1, unchanged 1, deleted 1
	// true
	// Deployment.apps shop/web Updated
	// ConfigMap shop/old-config Deleted
}

// Ensure declares children; a second call with nothing to change reports
// Unchanged. (A fake client stands in for the manager's cached client here.)
func ExampleEnsurer_Ensure() {
	ctx := context.Background()
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "webapp", UID: "6f1c"}}
	c := fakeClient(owner)
	e, err := ensure.New(c, "webapp-operator", ensure.WithPrune(&corev1.ConfigMap{}))
	if err != nil {
		panic(err)
	}
	config := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "webapp-config"}, Data: map[string]string{"mode": "prod"}}
	for range 2 {
		changes, err := e.Ensure(ctx, owner, config)
		if err != nil {
			panic(err)
		}
		fmt.Println(changes)
	}
	changes, err := e.Ensure(ctx, owner) // nothing desired any more
	if err != nil {
		panic(err)
	}
	fmt.Println(changes)
	// Output:
	// ConfigMap shop/webapp-config Created
	// ConfigMap shop/webapp-config Unchanged
	// ConfigMap shop/webapp-config Deleted
}

// CreateOrPatch keeps controllerutil.CreateOrUpdate's shape. Assigning the
// whole desired spec is fine: fields it leaves unset (server defaults,
// another actor's replicas) are not changes.
func ExampleEnsurer_CreateOrPatch() {
	ctx := context.Background()
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "webapp", UID: "6f1c"}}
	c := fakeClient(owner)
	e, err := ensure.New(c, "webapp-operator")
	if err != nil {
		panic(err)
	}
	for _, mode := range []string{"prod", "prod", "debug"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "webapp-config"}}
		change, err := e.CreateOrPatch(ctx, owner, cm, func() error {
			cm.Data = map[string]string{"mode": mode}
			return nil
		})
		if err != nil {
			panic(err)
		}
		fmt.Println(change.Action, cm.Data["mode"])
	}
	// Output:
	// Created prod
	// Unchanged prod
	// Updated debug
}

func fakeClient(objs ...client.Object) client.Client {
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace)
	return fake.NewClientBuilder().WithRESTMapper(mapper).WithObjects(objs...).Build()
}

// builderIndexer registers indexes on a fake client builder; with a manager,
// pass mgr.GetFieldIndexer() instead.
type builderIndexer struct{ b *fake.ClientBuilder }

func (i builderIndexer) IndexField(_ context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	i.b.WithIndex(obj, field, extract)
	return nil
}

// IndexOwner and WithOwnerIndex: prune looks the owner's children up in the
// cache index instead of scanning every cached ConfigMap.
func ExampleIndexOwner() {
	ctx := context.Background()
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "webapp", UID: "6f1c0a2e"}}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace)
	b := fake.NewClientBuilder().WithRESTMapper(mapper).WithObjects(owner)
	if err := ensure.IndexOwner(ctx, builderIndexer{b}, &corev1.ConfigMap{}); err != nil {
		panic(err)
	}
	e, err := ensure.New(b.Build(), "webapp-operator", ensure.WithPrune(&corev1.ConfigMap{}), ensure.WithOwnerIndex())
	if err != nil {
		panic(err)
	}
	config := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "webapp-config"}}
	if _, err := e.Ensure(ctx, owner, config); err != nil {
		panic(err)
	}
	changes, err := e.Ensure(ctx, owner) // nothing desired any more
	if err != nil {
		panic(err)
	}
	fmt.Println(changes, ensure.OwnerBucket(string(owner.UID)))
	// Output: ConfigMap shop/webapp-config Deleted 6f
}
