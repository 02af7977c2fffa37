package storageversion_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/storageversion"
	"github.com/opkit/opkit/testenv"
)

// converter is a conversion webhook for widgets whose versions share one
// schema: it rewrites apiVersion, and refuses to convert the object named
// refuse while refusing is set.
type converter struct {
	refuse   string
	refusing atomic.Bool
	calls    atomic.Int64
}

func (c *converter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.calls.Add(1)
	review := &apiextensionsv1.ConversionReview{}
	if err := json.NewDecoder(r.Body).Decode(review); err != nil || review.Request == nil {
		http.Error(w, "bad review", http.StatusBadRequest)
		return
	}
	resp := &apiextensionsv1.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	for _, raw := range review.Request.Objects {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw.Raw); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if c.refusing.Load() && u.GetName() == c.refuse {
			// A webhook that fails without naming the object, as many do.
			resp.ConvertedObjects = nil
			resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: "cannot convert"}
			break
		}
		u.SetAPIVersion(review.Request.DesiredAPIVersion)
		out, err := u.MarshalJSON()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: out})
	}
	review.Response, review.Request = resp, nil
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(review)
}

// TestAConversionFailureOnReadNamesTheObject: objects stored at v1; the CRD
// moves storage to v2 through a conversion webhook that cannot convert one
// of them. Listing at v2 then fails as a whole, with an error that names
// no object; the migration must stop with that object's namespace/name (in
// the error and the progress record), trim nothing and lose nothing, and
// finish once the webhook converts it.
func TestAConversionFailureOnReadNamesTheObject(t *testing.T) {
	ctx := context.Background()
	const group = "convfail.test.opkit.dev"
	ns := env.Namespace(t)
	conv := &converter{refuse: "bad"}
	srv := httptest.NewTLSServer(conv)
	t.Cleanup(srv.Close)
	caBundle := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})

	if _, err := applyCRD(t, widgets(group, map[string]bool{"v1": true}, "v1")); err != nil {
		t.Fatal(err)
	}
	names := []string{"a", "b", "bad", "c", "d"}
	for i, name := range names {
		if err := env.Client.Create(ctx, widget(group, "v1", ns, name, int64(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	upgraded := widgets(group, map[string]bool{"v1": true, "v2": true}, "v2", "v1")
	upgraded.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{
			ConversionReviewVersions: []string{"v1"},
			ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: ptr.To(srv.URL + "/convert"), CABundle: caBundle},
		},
	}
	if _, err := applyCRD(t, upgraded); err != nil {
		t.Fatal(err)
	}
	conv.refusing.Store(true)
	// The upgraded CRD takes effect asynchronously: wait until a v2 list
	// goes through the webhook and fails.
	testenv.WaitForEvery(t, 100*time.Millisecond, 30*time.Second, "listing at v2 fails in the webhook", func() (bool, error) {
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion(group + "/v2")
		l.SetKind("WidgetList")
		err := env.Client.List(ctx, l, client.InNamespace(ns))
		return err != nil && strings.Contains(err.Error(), "cannot convert"), nil
	})

	m := storageversion.New(env.Client, []string{"widgets." + group}, storageversion.WithPageSize(2))
	err := m.Migrate(ctx, "widgets."+group)
	if err == nil || !strings.Contains(err.Error(), ns+"/bad") {
		t.Fatalf("Migrate = %v, want an error naming %s/bad", err, ns)
	}
	t.Logf("Migrate: %v", err)
	crd := getCRD(t, "widgets."+group)
	if p, _ := storageversion.ReadProgress(crd); !strings.Contains(p.Failed, ns+"/bad") || p.Done {
		t.Fatalf("progress %+v, want the failure naming %s/bad recorded", p, ns)
	}
	if len(crd.Status.StoredVersions) != 2 {
		t.Fatalf("storedVersions %v trimmed after a failure", crd.Status.StoredVersions)
	}

	conv.refusing.Store(false)
	if err := m.Migrate(ctx, "widgets."+group); err != nil {
		t.Fatalf("the run after the webhook was fixed: %v", err)
	}
	if got := getCRD(t, "widgets."+group).Status.StoredVersions; len(got) != 1 || got[0] != "v2" {
		t.Fatalf("storedVersions %v, want [v2]", got)
	}
	for i, name := range names {
		w := &unstructured.Unstructured{}
		w.SetAPIVersion(group + "/v2")
		w.SetKind("Widget")
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, w); err != nil {
			t.Fatal(err)
		}
		if size, _, _ := unstructured.NestedInt64(w.Object, "spec", "size"); size != int64(i+1) {
			t.Fatalf("%s: spec.size %d, want %d (a field was lost)", name, size, i+1)
		}
	}
	if conv.calls.Load() == 0 {
		t.Fatal("the conversion webhook was never called: the test proves nothing")
	}
}
