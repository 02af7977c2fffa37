package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/examples/internal/e2etest"
	webappv1 "github.com/opkit/opkit/examples/webapp/api/v1"
	webappv1beta1 "github.com/opkit/opkit/examples/webapp/api/v1beta1"
	"github.com/opkit/opkit/examples/webapp/config"
	"github.com/opkit/opkit/examples/webapp/controller"
	"github.com/opkit/opkit/examples/webapp/registry"
	"github.com/opkit/opkit/storageversion"
)

// TestUpgradeMigratesStorageThenDropsV1beta1 walks an API upgrade end to
// end on the real API server, as a cluster would live it:
//
//  1. the era before v1: the CRD stores v1beta1, and WebApps are written at
//     v1beta1 (spec.container.image);
//  2. the upgrade: the CRD as shipped (v1 storage, v1beta1 still served
//     through the conversion webhook) and the operator as shipped — with its
//     storage-version migrator, running as a user bound only to the
//     generated role — which reconciles the old objects to Ready and
//     rewrites every WebApp at v1, then trims status.storedVersions to [v1];
//  3. v1beta1 is dropped from the CRD, which the API server accepts only
//     because nothing is stored at it any more.
//
// `kubectl get` at every served version works at every step, and no field
// written at v1beta1 is lost.
func TestUpgradeMigratesStorageThenDropsV1beta1(t *testing.T) {
	ns := env.Namespace(t)
	ctx := e2etest.Context(t, 4*time.Minute)
	shipped := &apiextensionsv1.CustomResourceDefinition{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: controller.CRDName}, shipped); err != nil {
		t.Fatal(err)
	}
	if shipped.Spec.Conversion == nil || shipped.Spec.Conversion.Strategy != apiextensionsv1.WebhookConverter {
		t.Fatalf("the installed CRD converts with %+v, want the conversion webhook", shipped.Spec.Conversion)
	}
	t.Cleanup(func() {
		// Leave the CRD as the other tests expect it (v1beta1 served again).
		if _, err := env.ApplyCRD(ctx, shipped); err != nil {
			t.Errorf("restore the CRD: %v", err)
		}
	})
	withStorage := func(storage string, keep ...string) *apiextensionsv1.CustomResourceDefinition {
		crd := shipped.DeepCopy()
		crd.Spec.Versions = slices.DeleteFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool {
			return !slices.Contains(keep, v.Name)
		})
		for i := range crd.Spec.Versions {
			crd.Spec.Versions[i].Storage = crd.Spec.Versions[i].Name == storage
		}
		if len(crd.Spec.Versions) == 1 {
			crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
		}
		return crd
	}
	kubectlGet := func(step string, versions ...string) {
		t.Helper()
		for _, v := range versions {
			out, err := env.Kubectl(ctx, "get", "webapps."+v+".apps.example.com", "-n", ns, "-o", "custom-columns=NAME:.metadata.name,VERSION:.apiVersion", "--no-headers")
			if err != nil {
				t.Fatalf("%s: kubectl get at %s: %v\n%s", step, v, err, out)
			}
			if n := strings.Count(out, "apps.example.com/"+v); n != 3 {
				t.Fatalf("%s: kubectl get at %s listed %d WebApps, want 3:\n%s", step, v, n, out)
			}
		}
	}

	// 1. Before v1: v1beta1 is the storage version.
	if _, err := env.ApplyCRD(ctx, withStorage("v1beta1", "v1beta1", "v1")); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		app := &webappv1beta1.WebApp{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("old-%d", i)},
			Spec: webappv1beta1.WebAppSpec{
				Container: webappv1beta1.Container{Image: "nginx:1.26", Port: int32(8000 + i)},
				Replicas:  ptr.To[int32](1),
				Config:    map[string]string{"era": "v1beta1"},
			},
		}
		if err := env.Client.Create(ctx, app); err != nil {
			t.Fatal(err)
		}
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: controller.CRDName}, crd); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(crd.Status.StoredVersions, "v1beta1") {
		t.Fatalf("storedVersions %v: the WebApps were not stored at v1beta1", crd.Status.StoredVersions)
	}
	kubectlGet("before the upgrade", "v1beta1", "v1")

	// 2. The upgrade: the shipped CRD, then the shipped operator with its migrator.
	if _, err := env.ApplyCRD(ctx, shipped); err != nil {
		t.Fatal(err)
	}
	kubectlGet("CRD upgraded, migration not run", "v1beta1", "v1")
	// v1beta1 cannot be dropped yet.
	if _, err := env.ApplyCRD(ctx, withStorage("v1", "v1")); err == nil || !strings.Contains(err.Error(), "storedVersions") {
		t.Fatalf("dropping v1beta1 before the migration: %v, want a refusal naming storedVersions", err)
	}
	objs, err := config.RBAC()
	if err != nil {
		t.Fatal(err)
	}
	limited, _ := e2etest.UserBoundTo(t, env, objs, "manager-role")
	mgr := e2etest.NewManager(t, limited, env.Scheme, ns)
	if err := controller.Setup(mgr, controller.Options{Registry: registry.New(), Observability: mgr.Observability, MigrateStorage: true}); err != nil {
		t.Fatal(err)
	}
	mgr.Run(t)
	e2etest.WaitFor(t, 90*time.Second, "storage migrated to v1 and storedVersions trimmed", func() (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKey{Name: controller.CRDName}, crd); err != nil {
			return false, err
		}
		p, _ := storageversion.ReadProgress(crd)
		if p.Failed != "" {
			return false, fmt.Errorf("migration failed: %s", p.Failed)
		}
		return p.Done && slices.Equal(crd.Status.StoredVersions, []string{"v1"}), nil
	})
	kubectlGet("migrated", "v1beta1", "v1")
	for i := range 3 {
		waitReady(t, &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("old-%d", i)}})
	}

	// 3. Drop v1beta1: accepted now; everything still served and intact.
	if _, err := env.ApplyCRD(ctx, withStorage("v1", "v1")); err != nil {
		t.Fatalf("dropping v1beta1 after the migration: %v", err)
	}
	kubectlGet("v1beta1 dropped", "v1")
	for i := range 3 {
		app := &webappv1.WebApp{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("old-%d", i)}, app); err != nil {
			t.Fatal(err)
		}
		if app.Spec.Image != "nginx:1.26" || app.Spec.Port != int32(8000+i) || app.Spec.Config["era"] != "v1beta1" ||
			app.Spec.Replicas == nil || *app.Spec.Replicas != 1 {
			t.Fatalf("%s after the migration: spec %+v, want what was written at v1beta1", app.Name, app.Spec)
		}
		if !conditions.IsTrue(app, conditions.Ready) {
			t.Fatalf("%s not Ready after v1beta1 was dropped: %+v", app.Name, app.Status.Conditions)
		}
	}
}
