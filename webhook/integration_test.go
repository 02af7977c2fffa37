package webhook_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	opconv "github.com/opkit/opkit/webhook/conversion"
	v1 "github.com/opkit/opkit/webhook/internal/gizmo/v1"
	"github.com/opkit/opkit/webhook/internal/gizmo/v1alpha1"
)

func TestAPIServerDeniesInvalidGizmoWithEveryFieldPath(t *testing.T) {
	ns := env.Namespace(t)
	g := newGizmo(ns, "bad")
	g.Spec.Size = ptrTo[int32](11)
	g.Spec.Source.Git = "https://example.com/repo.git" // and Image: two of a one-of
	err := env.Client.Create(testCtx(t), g)
	if !apierrors.IsInvalid(err) {
		t.Fatalf("want 422 Invalid from the validating webhook, got %v", err)
	}
	for _, want := range []string{
		`admission webhook "vgizmo.test.opkit.dev" denied the request`,
		"spec.size: Invalid value: 11: must be between 1 and 10, inclusive",
		"spec.source.image: Forbidden: may not be set together with spec.source.git",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	var st apierrors.APIStatus
	if !errors.As(err, &st) || st.Status().Details == nil || len(st.Status().Details.Causes) != 2 {
		t.Fatalf("want 2 causes in the status details, got %#v", err)
	}
}

func TestKubectlShowsEveryFieldPath(t *testing.T) {
	ns := env.Namespace(t)
	manifest := `apiVersion: test.opkit.dev/v1
kind: Gizmo
metadata: {name: bad, namespace: ` + ns + `}
spec: {size: 0, source: {}}
`
	path := filepath.Join(t.TempDir(), "gizmo.yaml")
	if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := env.Kubectl(testCtx(t), "create", "-f", path)
	if err == nil {
		t.Fatalf("kubectl create succeeded:\n%s", out)
	}
	for _, want := range []string{"spec.size: Invalid value: 0", "spec.source: Required value: exactly one of spec.source.git, spec.source.image must be set"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl output lacks %q:\n%s", want, out)
		}
	}
}

func TestDefaultingAppliedOnCreate(t *testing.T) {
	ns := env.Namespace(t)
	ctx := testCtx(t)
	if err := env.Client.Create(ctx, newGizmo(ns, "plain")); err != nil {
		t.Fatal(err)
	}
	got := &v1.Gizmo{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "plain"}, got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Size == nil || *got.Spec.Size != 1 || got.Spec.Color != "blue" {
		t.Fatalf("stored spec not defaulted: %+v", got.Spec)
	}
	// Values the user set are kept.
	g := newGizmo(ns, "custom")
	g.Spec.Size, g.Spec.Color = ptrTo[int32](7), "red"
	if err := env.Client.Create(ctx, g); err != nil {
		t.Fatal(err)
	}
	if *g.Spec.Size != 7 || g.Spec.Color != "red" {
		t.Fatalf("defaulting overwrote user values: %+v", g.Spec)
	}
}

func TestImmutableFieldDeniedOnUpdate(t *testing.T) {
	ns := env.Namespace(t)
	ctx := testCtx(t)
	g := newGizmo(ns, "g")
	g.Spec.Region = "eu-west"
	if err := env.Client.Create(ctx, g); err != nil {
		t.Fatal(err)
	}
	g.Spec.Region = "us-east"
	err := env.Client.Update(ctx, g)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.region: Forbidden: field is immutable") {
		t.Fatalf("want spec.region immutable denial, got %v", err)
	}
	g.Spec.Region = "eu-west"
	g.Spec.Color = "green"
	if err := env.Client.Update(ctx, g); err != nil {
		t.Fatalf("update of a mutable field denied: %v", err)
	}
}

func TestReferenceMustExist(t *testing.T) {
	ns := env.Namespace(t)
	ctx := testCtx(t)
	g := newGizmo(ns, "ref")
	g.Spec.ConfigMapRef = "settings"
	err := env.Client.Create(ctx, g)
	want := `spec.configMapRef: Not found: "settings": ConfigMap ` + ns + `/settings does not exist`
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
		t.Fatalf("want %q, got %v", want, err)
	}
	if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}}); err != nil {
		t.Fatal(err)
	}
	g = newGizmo(ns, "ref")
	g.Spec.ConfigMapRef = "settings"
	if err := env.Client.Create(ctx, g); err != nil {
		t.Fatalf("create with an existing reference denied: %v", err)
	}
}

func TestDeleteValidationIsSeparate(t *testing.T) {
	ns := env.Namespace(t)
	ctx := testCtx(t)
	g := newGizmo(ns, "keep")
	g.Annotations = map[string]string{protectedAnnotation: "true"}
	if err := env.Client.Create(ctx, g); err != nil {
		t.Fatal(err)
	}
	err := env.Client.Delete(ctx, g)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "metadata.annotations[test.opkit.dev/protected]: Forbidden") {
		t.Fatalf("want protected-delete denial, got %v", err)
	}
	delete(g.Annotations, protectedAnnotation)
	if err := env.Client.Update(ctx, g); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, g); err != nil {
		t.Fatalf("delete of an unprotected Gizmo denied: %v", err)
	}
}

type warningRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warningRecorder) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, msg string) {
	w.mu.Lock()
	w.msgs = append(w.msgs, msg)
	w.mu.Unlock()
}

func TestWarningsReachTheClient(t *testing.T) {
	ns := env.Namespace(t)
	rec := &warningRecorder{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandlerWithContext = rec
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	g := newGizmo(ns, "old-style")
	g.Spec.Legacy = "gold"
	if err := c.Create(testCtx(t), g); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if !contains(rec.msgs, "spec.legacy is deprecated; use spec.tier") {
		t.Fatalf("warnings = %q", rec.msgs)
	}
}

func TestConversionThroughTheAPIServerLosesNothing(t *testing.T) {
	ns := env.Namespace(t)
	ctx := testCtx(t)
	old := &v1alpha1.Gizmo{}
	old.Namespace, old.Name = ns, "converted"
	old.Spec.Colour, old.Spec.Git, old.Spec.Region = "purple", "https://example.com/g.git", "ap-south"
	if err := env.Client.Create(ctx, old); err != nil {
		t.Fatalf("create v1alpha1: %v", err)
	}
	key := client.ObjectKeyFromObject(old)

	// Read back as v1: converted, and defaulted by the v1 webhook (matchPolicy Equivalent).
	hub := &v1.Gizmo{}
	if err := env.Client.Get(ctx, key, hub); err != nil {
		t.Fatal(err)
	}
	if hub.Spec.Color != "purple" || hub.Spec.Source.Git != "https://example.com/g.git" || hub.Spec.Region != "ap-south" ||
		hub.Spec.Size == nil || *hub.Spec.Size != 1 {
		t.Fatalf("v1 view wrong: %+v", hub.Spec)
	}

	// Set the field v1alpha1 cannot hold, through v1.
	hub.Spec.Tier = "gold"
	if err := env.Client.Update(ctx, hub); err != nil {
		t.Fatal(err)
	}

	// Read as v1alpha1: the tier travels in the annotation.
	spoke := &v1alpha1.Gizmo{}
	if err := env.Client.Get(ctx, key, spoke); err != nil {
		t.Fatal(err)
	}
	if got := spoke.Annotations[opconv.DataAnnotation]; got != `{"tier":"gold"}` {
		t.Fatalf("v1alpha1 view: annotation %s = %q, want the stashed tier", opconv.DataAnnotation, got)
	}
	if spoke.Spec.Colour != "purple" || *spoke.Spec.Size != 1 {
		t.Fatalf("v1alpha1 view wrong: %+v", spoke.Spec)
	}

	// Update through v1alpha1 (a client that knows nothing of tier)...
	spoke.Spec.Colour = "orange"
	if err := env.Client.Update(ctx, spoke); err != nil {
		t.Fatal(err)
	}
	// ...and the tier is still there in v1, with no annotation left behind.
	if err := env.Client.Get(ctx, key, hub); err != nil {
		t.Fatal(err)
	}
	if hub.Spec.Tier != "gold" || hub.Spec.Color != "orange" {
		t.Fatalf("v1 after a v1alpha1 update: %+v", hub.Spec)
	}
	if _, ok := hub.Annotations[opconv.DataAnnotation]; ok {
		t.Fatalf("hub carries the conversion annotation: %v", hub.Annotations)
	}
}

// TestCertificateRotationUnderLoad keeps creating Gizmos, through both API
// versions (admission and conversion webhooks), while the package's Rotator
// replaces serving certificates every ~3s and the CA every ~8s.
func TestCertificateRotationUnderLoad(t *testing.T) {
	ns := env.Namespace(t)
	ctx := testCtx(t)
	start := len(events.snapshot())
	deadline := time.Now().Add(45 * time.Second)
	var n, failures, caIssued, certIssued int
	leaves, issuers := map[string]bool{}, map[string]bool{}
	for time.Now().Before(deadline) {
		var err error
		name := "load-" + strconv.Itoa(n)
		if n%2 == 0 {
			err = env.Client.Create(ctx, newGizmo(ns, name))
		} else {
			s := &v1alpha1.Gizmo{}
			s.Namespace, s.Name, s.Spec.Image = ns, name, "img"
			err = env.Client.Create(ctx, s)
			if err == nil {
				err = env.Client.Get(ctx, client.ObjectKeyFromObject(s), &v1.Gizmo{})
			}
		}
		n++
		if leaf, err := servedCertificate(ctx); err != nil {
			t.Errorf("TLS handshake with the webhook server: %v", err)
		} else {
			leaves[leaf.SerialNumber.String()] = true
			issuers[string(leaf.AuthorityKeyId)] = true
		}
		if err != nil {
			failures++
			t.Errorf("request %d during rotation failed: %v", n, err)
		}
		caIssued, certIssued = 0, 0
		for _, e := range events.snapshot()[start:] {
			if e.Err != nil {
				t.Errorf("rotator pass failed: %v", e.Err)
			}
			if e.CAIssued {
				caIssued++
			}
			if e.CertIssued {
				certIssued++
			}
		}
		// Two CA generations published and a certificate from the newer one
		// in service means requests crossed a full CA hand-over.
		if caIssued >= 2 && certIssued >= 4 && len(issuers) >= 2 && n >= 50 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("%d requests, %d failures; the rotator issued %d CAs and %d serving certificates; the server presented %d certificates from %d CAs",
		n, failures, caIssued, certIssued, len(leaves), len(issuers))
	if caIssued < 2 || certIssued < 4 || len(leaves) < 3 || len(issuers) < 2 {
		t.Fatalf("rotation did not happen enough: %d CAs and %d certificates issued, %d certificates from %d CAs served",
			caIssued, certIssued, len(leaves), len(issuers))
	}
}

// servedCertificate opens a new TLS connection to the webhook server,
// verifying it against the bundle the API server was last given.
func servedCertificate(ctx context.Context) (*x509.Certificate, error) {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(rotator.CABundle())
	w := env.Envtest.WebhookInstallOptions
	d := tls.Dialer{Config: &tls.Config{RootCAs: pool, ServerName: w.LocalServingHost, MinVersion: tls.VersionTLS13}}
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(w.LocalServingHost, strconv.Itoa(w.LocalServingPort)))
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }()
	return conn.(*tls.Conn).ConnectionState().PeerCertificates[0], nil
}

// review posts body to the webhook server and decodes the AdmissionReview.
func review(t *testing.T, hc *http.Client, url, contentType string, body []byte) admissionv1.AdmissionResponse {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTP %d: %s", resp.StatusCode, raw)
	}
	var ar admissionv1.AdmissionReview
	if err := json.Unmarshal(raw, &ar); err != nil || ar.Response == nil {
		t.Fatalf("not an AdmissionReview (%v): %s", err, raw)
	}
	return *ar.Response
}

func admissionReview(op admissionv1.Operation, kind metav1.GroupVersionKind, obj, old []byte) []byte {
	ar := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: "0b8f8a0e-1111-2222-3333-444455556666", Kind: kind, Operation: op, Name: "x", Namespace: "ns",
			Resource:  metav1.GroupVersionResource{Group: "test.opkit.dev", Version: "v1", Resource: "gizmos"},
			Object:    runtime.RawExtension{Raw: obj},
			OldObject: runtime.RawExtension{Raw: old},
		},
	}
	b, _ := json.Marshal(ar)
	return b
}

func TestMalformedAdmissionRequestsAreDenied(t *testing.T) {
	hc, base := webhookClient(t)
	gizmoKind := metav1.GroupVersionKind{Group: "test.opkit.dev", Version: "v1", Kind: "Gizmo"}
	good := []byte(`{"apiVersion":"test.opkit.dev/v1","kind":"Gizmo","metadata":{"name":"x","namespace":"ns"},"spec":{"source":{"image":"i"}}}`)
	cases := []struct {
		name, path, contentType string
		body                    []byte
		want                    string
	}{
		{"garbage body", "/validate-test-opkit-dev-v1-gizmo", "application/json", []byte("{not json"), ""},
		{"garbage body to defaulter", "/mutate-test-opkit-dev-v1-gizmo", "application/json", []byte("\x00\x01garbage"), ""},
		{"wrong content type", "/validate-test-opkit-dev-v1-gizmo", "text/plain", admissionReview(admissionv1.Create, gizmoKind, good, nil), "contentType=text/plain"},
		{"wrong request kind", "/validate-test-opkit-dev-v1-gizmo", "application/json",
			admissionReview(admissionv1.Create, metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, []byte(`{"apiVersion":"v1","kind":"ConfigMap"}`), nil),
			"request.kind: Invalid value: \"v1, Kind=ConfigMap\": this webhook admits only test.opkit.dev/v1, Kind=Gizmo"},
		{"object of another kind", "/mutate-test-opkit-dev-v1-gizmo", "application/json",
			admissionReview(admissionv1.Create, gizmoKind, []byte(`{"apiVersion":"v1","kind":"Secret"}`), nil),
			"request.object.kind: Invalid value"},
		{"missing object", "/validate-test-opkit-dev-v1-gizmo", "application/json",
			admissionReview(admissionv1.Create, gizmoKind, nil, nil), "request.object: Required value"},
		{"missing old object on update", "/validate-test-opkit-dev-v1-gizmo", "application/json",
			admissionReview(admissionv1.Update, gizmoKind, good, nil), "request.oldObject: Required value"},
		{"object that is not JSON", "/mutate-test-opkit-dev-v1-gizmo", "application/json",
			admissionReview(admissionv1.Create, gizmoKind, []byte(`"a string"`), nil), "request.object: Invalid value"},
		{"wrong field type", "/validate-test-opkit-dev-v1-gizmo", "application/json",
			admissionReview(admissionv1.Create, gizmoKind, []byte(`{"apiVersion":"test.opkit.dev/v1","kind":"Gizmo","spec":{"size":"big"}}`), nil),
			"request.object: Invalid value"},
		{"unknown operation", "/validate-test-opkit-dev-v1-gizmo", "application/json",
			admissionReview("EXPLODE", gizmoKind, good, nil), `request.operation: Unsupported value: "EXPLODE"`},
		{"invalid spec", "/validate-test-opkit-dev-v1-gizmo", "application/json",
			admissionReview(admissionv1.Create, gizmoKind, []byte(`{"apiVersion":"test.opkit.dev/v1","kind":"Gizmo","metadata":{"name":"x","namespace":"ns"},"spec":{"size":99}}`), nil),
			"spec.size: Invalid value: 99"},
		{"validator panics", panicPath, "application/json", admissionReview(admissionv1.Create, gizmoKind, good, nil), "panicked"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := review(t, hc, base+tc.path, tc.contentType, tc.body)
			if r.Allowed {
				t.Fatalf("allowed: %+v", r)
			}
			if r.Result == nil || r.Result.Code < 400 || r.Result.Code >= 500 {
				t.Fatalf("want a 4xx denial, got %+v", r.Result)
			}
			if r.Result.Message == "" || !strings.Contains(r.Result.Message, tc.want) {
				t.Fatalf("message %q lacks %q", r.Result.Message, tc.want)
			}
		})
	}
	// A well-formed request still passes after all that.
	r := review(t, hc, base+"/validate-test-opkit-dev-v1-gizmo", "application/json", admissionReview(admissionv1.Create, gizmoKind, good, nil))
	if !r.Allowed || r.UID != "0b8f8a0e-1111-2222-3333-444455556666" {
		t.Fatalf("valid request: %+v", r)
	}
}

func ptrTo[T any](v T) *T { return &v }

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
