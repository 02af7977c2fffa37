package storageversion_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/storageversion"
	"github.com/opkit/opkit/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		panic(err)
	}
	os.Exit(testenv.RunMain(m, &env, testenv.WithScheme(s)))
}

// widgets returns the CRD of widgets.<group> with the given versions; the
// first is the storage version. Each version has the same schema (spec.size),
// so no conversion webhook is needed (strategy None).
func widgets(group string, served map[string]bool, versions ...string) *apiextensionsv1.CustomResourceDefinition {
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Widget", ListKind: "WidgetList", Plural: "widgets", Singular: "widget"},
		},
	}
	for i, v := range versions {
		crd.Spec.Versions = append(crd.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{
			Name: v, Served: served[v], Storage: i == 0,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
				Type: "object",
				Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}}},
				},
			}},
		})
	}
	return crd
}

func widget(group, version, ns, name string, size int64) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": size}}}
	u.SetAPIVersion(group + "/" + version)
	u.SetKind("Widget")
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func getCRD(t *testing.T, name string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: name}, crd); err != nil {
		t.Fatal(err)
	}
	return crd
}

// migrationSize is the number of objects TestMigrateThenDropTheOldVersion
// migrates: 200 in CI, OPKIT_MIGRATION_N (e.g. 1000, 5000) for the figures.
func migrationSize(t *testing.T) int {
	if v := os.Getenv("OPKIT_MIGRATION_N"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	return 200
}

// TestMigrateThenDropTheOldVersion: objects written at v1 (server-side
// apply, so their managedFields are recorded at v1); the CRD is upgraded to
// store v2 and stop serving v1; the migrator rewrites every object, drops
// the v1 managedFields entries, trims status.storedVersions to [v2], and v1
// can then be removed from the CRD. Nothing in the objects is lost.
func TestMigrateThenDropTheOldVersion(t *testing.T) {
	ctx := context.Background()
	const group = "migrate.test.opkit.dev"
	ns := env.Namespace(t)
	if _, err := applyCRD(t, widgets(group, map[string]bool{"v1": true}, "v1")); err != nil {
		t.Fatal(err)
	}
	n := migrationSize(t)
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			w := widget(group, "v1", ns, fmt.Sprintf("w%05d", i), int64(i))
			errs <- env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(w), client.FieldOwner("user"))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// N+1: store v2, stop serving v1.
	if _, err := applyCRD(t, widgets(group, map[string]bool{"v2": true}, "v2", "v1")); err != nil {
		t.Fatal(err)
	}
	if got := getCRD(t, "widgets."+group).Status.StoredVersions; len(got) != 2 {
		t.Fatalf("storedVersions %v before the migration, want v1 and v2", got)
	}
	// v1 cannot be dropped yet: the API server still lists it as stored.
	if _, err := applyCRD(t, widgets(group, map[string]bool{"v2": true}, "v2")); err == nil || !strings.Contains(err.Error(), "storedVersions") {
		t.Fatalf("dropping v1 before the migration: %v, want a refusal naming storedVersions", err)
	}

	cfg, requests := testenv.CountRequests(env.Config)
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	m := storageversion.New(c, []string{"widgets." + group}, storageversion.WithPageSize(100), storageversion.WithRateLimit(1000, 1000), storageversion.WithConcurrency(8))
	start := time.Now()
	if err := m.Migrate(ctx, "widgets."+group); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	crd := getCRD(t, "widgets."+group)
	p, ok := storageversion.ReadProgress(crd)
	if !ok || !p.Done || p.Migrated != int64(n) || p.StorageVersion != "v2" {
		t.Fatalf("progress %+v, want done with %d migrated at v2", p, n)
	}
	if got := crd.Status.StoredVersions; len(got) != 1 || got[0] != "v2" {
		t.Fatalf("storedVersions %v, want [v2]", got)
	}
	t.Logf("migrated %d objects in %v: %.0f objects/s, %.2f requests per object (%d updates, %d lists)",
		n, took.Round(time.Millisecond), float64(n)/took.Seconds(), float64(requests.Total())/float64(n),
		requests.Count("update", "widgets."+group), requests.Count("list", "widgets."+group))

	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion(group + "/v2")
	list.SetKind("WidgetList")
	if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != n {
		t.Fatalf("%d widgets after the migration, want %d", len(list.Items), n)
	}
	for _, w := range list.Items {
		for _, e := range w.GetManagedFields() {
			if e.APIVersion == group+"/v1" {
				t.Fatalf("%s still has a managedFields entry at v1: %+v", w.GetName(), e)
			}
		}
		var i int
		if _, err := fmt.Sscanf(w.GetName(), "w%05d", &i); err != nil {
			t.Fatal(err)
		}
		if size, _, _ := unstructured.NestedInt64(w.Object, "spec", "size"); size != int64(i) {
			t.Fatalf("%s: spec.size %d, want %d", w.GetName(), size, i)
		}
	}
	// N+1 without v1 at all is accepted now, and the objects are served.
	if _, err := applyCRD(t, widgets(group, map[string]bool{"v2": true}, "v2")); err != nil {
		t.Fatalf("dropping v1 after the migration: %v", err)
	}
	// (Were an object still stored at v1, the API server could not decode
	// it any more: "corrupt object ... invalid group/version".)
	testenv.WaitForEvery(t, 100*time.Millisecond, 15*time.Second, "every widget served after dropping v1", func() (bool, error) {
		err := env.Client.List(ctx, list, client.InNamespace(ns))
		return err == nil && len(list.Items) == n, err
	})
	// A second run has nothing to do.
	requests.Reset()
	if err := m.Migrate(ctx, "widgets."+group); err != nil {
		t.Fatal(err)
	}
	if requests.Writes() != 0 {
		t.Fatalf("a finished migration wrote again:\n%s", requests)
	}
}

// TestAnObjectThatCannotBeRewrittenStopsTheMigration: an admission policy
// refuses updates of one object; the migration stops there, names it, and
// trims nothing; once the object can be written, a new run finishes.
func TestAnObjectThatCannotBeRewrittenStopsTheMigration(t *testing.T) {
	ctx := context.Background()
	const group = "stuck.test.opkit.dev"
	ns := env.Namespace(t)
	if _, err := applyCRD(t, widgets(group, map[string]bool{"v1": true}, "v1")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "bad", "c"} {
		if err := env.Client.Create(ctx, widget(group, "v1", ns, name, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := applyCRD(t, widgets(group, map[string]bool{"v1": true, "v2": true}, "v2", "v1")); err != nil {
		t.Fatal(err)
	}
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "refuse-bad-widget"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: []string{"widgets"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "object.metadata.name != 'bad'", Message: "bad cannot be written"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "refuse-bad-widget"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: policy.Name, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	for _, o := range []client.Object{policy, binding} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
	// The policy takes effect asynchronously: wait until it refuses.
	testenv.WaitForEvery(t, 100*time.Millisecond, 30*time.Second, "the policy refuses updates of bad", func() (bool, error) {
		bad := &unstructured.Unstructured{}
		bad.SetAPIVersion(group + "/v2")
		bad.SetKind("Widget")
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bad"}, bad); err != nil {
			return false, err
		}
		return env.Client.Update(ctx, bad, client.DryRunAll) != nil, nil
	})

	m := storageversion.New(env.Client, []string{"widgets." + group})
	err := m.Migrate(ctx, "widgets."+group)
	if err == nil || !strings.Contains(err.Error(), ns+"/bad") {
		t.Fatalf("Migrate = %v, want an error naming %s/bad", err, ns)
	}
	crd := getCRD(t, "widgets."+group)
	if p, _ := storageversion.ReadProgress(crd); !strings.Contains(p.Failed, ns+"/bad") || p.Done {
		t.Fatalf("progress %+v, want the failure recorded", p)
	}
	if len(crd.Status.StoredVersions) != 2 {
		t.Fatalf("storedVersions %v trimmed after a failure", crd.Status.StoredVersions)
	}
	if err := env.Client.Delete(ctx, binding); err != nil {
		t.Fatal(err)
	}
	testenv.WaitForEvery(t, 100*time.Millisecond, 30*time.Second, "a run after the fix finishes", func() (bool, error) {
		return m.Migrate(ctx, "widgets."+group) == nil, nil
	})
	if got := getCRD(t, "widgets."+group).Status.StoredVersions; len(got) != 1 || got[0] != "v2" {
		t.Fatalf("storedVersions %v, want [v2]", got)
	}
}

// applyCRD runs env.ApplyCRD and deletes the CRD when the test ends.
func applyCRD(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) (*apiextensionsv1.CustomResourceDefinition, error) {
	t.Helper()
	out, err := env.ApplyCRD(context.Background(), crd)
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: crd.Name}})
	})
	return out, err
}
