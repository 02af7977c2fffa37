package testenv_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/testenv"
	"github.com/opkit/opkit/testenv/assets"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.RunMain(m, &env, testenv.WithWorkloads(), testenv.WithCRDPaths("testdata/crds")))
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// eventually polls cond with testenv.WaitFor (every 100ms).
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	testenv.WaitFor(t, timeout, what, cond)
}

func widget(ns, name string, size int64) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "test.opkit.dev", Version: "v1", Kind: "Widget"})
	u.SetNamespace(ns)
	u.SetName(name)
	_ = unstructured.SetNestedField(u.Object, size, "spec", "size")
	return u
}

func TestCRDInstalledAndSchemaEnforced(t *testing.T) {
	ns := env.Namespace(t)
	if err := env.Client.Create(ctx(t), widget(ns, "ok", 3)); err != nil {
		t.Fatalf("valid widget rejected: %v", err)
	}
	err := env.Client.Create(ctx(t), widget(ns, "too-big", 11))
	if !apierrors.IsInvalid(err) {
		t.Fatalf("want Invalid for size 11, got %v", err)
	}
	if !strings.Contains(err.Error(), "spec.size") {
		t.Fatalf("error does not name the field: %v", err)
	}
}

func TestGarbageCollectorDeletesDependents(t *testing.T) {
	ns := env.Namespace(t)
	c := ctx(t)
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner"}}
	if err := env.Client.Create(c, owner); err != nil {
		t.Fatal(err)
	}
	dep := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: "dependent",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}},
	}}
	if err := env.Client.Create(c, dep); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(c, owner); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "dependent ConfigMap garbage-collected", func() (bool, error) {
		err := env.Client.Get(c, client.ObjectKeyFromObject(dep), &corev1.ConfigMap{})
		return apierrors.IsNotFound(err), err
	})
}

func TestDeploymentBecomesAvailable(t *testing.T) {
	ns := env.Namespace(t)
	c := ctx(t)
	labels := map[string]string{"app": "web"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
			},
		},
	}
	if err := env.Client.Create(c, d); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, "Deployment Available with 2 ready replicas", func() (bool, error) {
		if err := env.Client.Get(c, client.ObjectKeyFromObject(d), d); err != nil {
			return false, err
		}
		for _, cond := range d.Status.Conditions {
			if cond.Type == appsv1.DeploymentAvailable && cond.Status == corev1.ConditionTrue {
				return d.Status.ReadyReplicas == 2, nil
			}
		}
		return false, nil
	})
	var pods corev1.PodList
	if err := env.Client.List(c, &pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning || p.Spec.NodeName != testenv.FakeNodeName {
			t.Errorf("pod %s: phase %s on node %q, want Running on %s", p.Name, p.Status.Phase, p.Spec.NodeName, testenv.FakeNodeName)
		}
	}
}

func TestKubectlUsesKubeconfig(t *testing.T) {
	ns := env.Namespace(t)
	c := ctx(t)
	if err := env.Client.Create(c, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "seen-by-kubectl"}}); err != nil {
		t.Fatal(err)
	}
	out, err := env.Kubectl(c, "get", "configmaps", "-n", ns, "-o", "name")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "configmap/seen-by-kubectl") {
		t.Fatalf("kubectl output lacks the ConfigMap:\n%s", out)
	}
}

func TestRequestCountsAreExact(t *testing.T) {
	ns := env.Namespace(t)
	c := ctx(t)
	cfg, counter := testenv.CountRequests(env.Config)
	cl, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	counter.Reset() // client.New may run discovery
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "counted"}}
	steps := []func() error{
		func() error { return cl.Create(c, cm) },
		func() error { return cl.Get(c, client.ObjectKeyFromObject(cm), cm) },
		func() error { return cl.Get(c, client.ObjectKeyFromObject(cm), cm) },
		func() error {
			cm.Data = map[string]string{"a": "b"}
			return cl.Update(c, cm)
		},
		func() error {
			return cl.Patch(c, cm, client.RawPatch("application/merge-patch+json", []byte(`{"data":{"c":"d"}}`)))
		},
		func() error { return cl.List(c, &corev1.ConfigMapList{}, client.InNamespace(ns)) },
		func() error { return cl.Create(c, widget(ns, "w", 1)) },
		func() error {
			w := widget(ns, "w", 1)
			return cl.Status().Patch(c, w, client.RawPatch("application/merge-patch+json", []byte(`{"status":{"x":1}}`)))
		},
		func() error { return cl.Delete(c, cm) },
	}
	for i, s := range steps {
		if err := s(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	want := map[testenv.Request]int{
		{Verb: "create", Resource: "configmaps"}:                   1,
		{Verb: "get", Resource: "configmaps"}:                      2,
		{Verb: "update", Resource: "configmaps"}:                   1,
		{Verb: "patch", Resource: "configmaps"}:                    1,
		{Verb: "list", Resource: "configmaps"}:                     1,
		{Verb: "create", Resource: "widgets.test.opkit.dev"}:       1,
		{Verb: "patch", Resource: "widgets.test.opkit.dev/status"}: 1,
		{Verb: "delete", Resource: "configmaps"}:                   1,
	}
	got := counter.Snapshot()
	// The first request for the CRD's group may be preceded by discovery (GET /apis/…).
	for k := range got {
		if k.Verb == "get" && strings.HasPrefix(k.Resource, "/api") {
			delete(got, k)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("counted:\n%s\nwant %v", counter, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %d, want %d\nall:\n%s", k, got[k], v, counter)
		}
	}
	if w := counter.Writes(); w != 6 {
		t.Errorf("writes = %d, want 6", w)
	}
}

func TestPlainControlPlaneStartStop(t *testing.T) {
	t0 := time.Now()
	e, err := testenv.New()
	if err != nil {
		t.Fatal(err)
	}
	started := time.Since(t0)
	if err := e.Client.Create(ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "smoke"}}); err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()
	if err := e.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("plain control plane: start %.2fs, stop %.2fs", started.Seconds(), time.Since(t1).Seconds())
	if err := e.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

func TestMissingBinariesFailWithBuildCommand(t *testing.T) {
	t.Setenv("KUBEBUILDER_ASSETS", "")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("OPKIT_ASSETS_BUILD", "")
	e, err := testenv.New()
	if err == nil {
		_ = e.Stop()
		t.Fatal("New succeeded without binaries")
	}
	if !strings.Contains(err.Error(), "go run github.com/opkit/opkit/cmd/opkit-assets") {
		t.Fatalf("error does not name the build command: %v", err)
	}
}

func TestFakeNodeHeartbeats(t *testing.T) {
	c := ctx(t)
	var lease coordinationv1.Lease
	key := client.ObjectKey{Namespace: "kube-node-lease", Name: testenv.FakeNodeName}
	eventually(t, 30*time.Second, "node Lease exists", func() (bool, error) {
		err := env.Client.Get(c, key, &lease)
		return err == nil && lease.Spec.RenewTime != nil, err
	})
	first := lease.Spec.RenewTime.Time
	// kwok renews every quarter of the 40 s lease duration.
	eventually(t, 30*time.Second, "node Lease renewed", func() (bool, error) {
		err := env.Client.Get(c, key, &lease)
		return err == nil && lease.Spec.RenewTime.After(first), err
	})
}

// A plain environment needs only etcd and kube-apiserver: it starts from a
// directory holding just those two, and asks for kubectl, the controller
// manager and the rest only when they are used, naming the command that
// builds exactly what is missing.
func TestPlainModeNeedsOnlyEtcdAndAPIServer(t *testing.T) {
	plain := t.TempDir()
	for _, b := range assets.Plain {
		if err := os.Symlink(filepath.Join(env.AssetsDir, b), filepath.Join(plain, b)); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("KUBEBUILDER_ASSETS", plain)
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // an empty cache
	t.Setenv("OPKIT_ASSETS_BUILD", "")

	e, err := testenv.New()
	if err != nil {
		t.Fatalf("plain mode from etcd and kube-apiserver alone: %v", err)
	}
	defer func() { _ = e.Stop() }()
	if e.AssetsDir != plain {
		t.Errorf("AssetsDir = %s, want %s", e.AssetsDir, plain)
	}
	_, err = e.Kubectl(ctx(t), "version")
	if err == nil || !strings.Contains(err.Error(), assets.BuildCommand+" -binaries kubectl") {
		t.Errorf("kubectl without a kubectl binary: want the command that builds only kubectl, got %v", err)
	}

	g, err := testenv.New(testenv.WithGarbageCollector())
	if err == nil {
		_ = g.Stop()
		t.Fatal("the garbage-collector mode started without kube-controller-manager")
	}
	if !strings.Contains(err.Error(), assets.BuildCommand+" -binaries etcd,kube-apiserver,kube-controller-manager") {
		t.Errorf("want the command that builds the gc mode's binaries, got %v", err)
	}
}
