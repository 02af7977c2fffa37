package webhook_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/opkit/opkit/testenv"
	"github.com/opkit/opkit/webhook"
	"github.com/opkit/opkit/webhook/certs"
	v1 "github.com/opkit/opkit/webhook/internal/gizmo/v1"
	"github.com/opkit/opkit/webhook/internal/gizmo/v1alpha1"
	"github.com/opkit/opkit/webhook/webhooktest"
)

const (
	validatingConfig = "gizmo-validating"
	mutatingConfig   = "gizmo-mutating"
	gizmoCRD         = "gizmos.test.opkit.dev"
	panicPath        = "/validate-panics"
)

var (
	env     *testenv.Env
	scheme  *runtime.Scheme
	rotator *certs.Rotator
	events  = &eventLog{}
	gvk     = v1.GroupVersion.WithKind("Gizmo")
)

// eventLog records the Rotator's events for the rotation test.
type eventLog struct {
	mu     sync.Mutex
	events []certs.Event
}

func (l *eventLog) Rotated(e certs.Event) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

func (l *eventLog) snapshot() []certs.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]certs.Event(nil), l.events...)
}

func TestMain(m *testing.M) { os.Exit(run(m)) }

// run starts the control plane through testenv.RunMain, so the package gets
// its leak check: the webhook manager, the Rotator and every manager a test
// starts must have stopped once the tests ended.
func run(m *testing.M) int {
	scheme = runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, v1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return testenv.RunMain(webhookMain{m}, &env,
		testenv.WithScheme(scheme),
		testenv.WithCRDPaths("testdata/crds"),
		testenv.WithWebhooks(envtest.WebhookInstallOptions{
			ValidatingWebhooks: []*admissionregistrationv1.ValidatingWebhookConfiguration{validatingConfiguration()},
			MutatingWebhooks:   []*admissionregistrationv1.MutatingWebhookConfiguration{mutatingConfiguration()},
		}),
	)
}

// webhookMain serves the webhooks for the whole package from a manager of
// their own (started once env is up) around the tests, and stops it before
// RunMain stops the control plane and checks for leaked goroutines.
type webhookMain struct{ m *testing.M }

func (w webhookMain) Run() int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	certDir, err := os.MkdirTemp("", "opkit-webhook-certs-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(certDir) }()
	stopped, err := startManager(ctx, certDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := w.m.Run()
	cancel()
	if err := <-stopped; err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// startManager serves the Gizmo webhooks to the control plane with
// certificates from a Rotator whose windows are seconds long, so every test
// in this package runs while serving certificates and CAs rotate. They are
// written to certDir.
func startManager(ctx context.Context, certDir string) (<-chan error, error) {
	var err error
	rotator, err = certs.NewRotator(env.Client,
		certs.WithCertDir(certDir),
		certs.WithHosts(certs.LocalHosts()...),
		certs.WithCAValidity(16*time.Second, 8*time.Second),
		certs.WithCertValidity(6*time.Second, 3*time.Second),
		certs.WithCheckInterval(200*time.Millisecond),
		certs.WithPropagationDelay(2*time.Second),
		certs.WithTargets(certs.Targets{
			ValidatingWebhookConfigurations: []string{validatingConfig},
			MutatingWebhookConfigurations:   []string{mutatingConfig},
			CRDs:                            []string{gizmoCRD},
		}),
		certs.WithObserver(events),
	)
	if err != nil {
		return nil, err
	}
	if err := rotator.Ensure(ctx); err != nil {
		return nil, err
	}
	opts := webhooktest.ServerOptions(env.Envtest.WebhookInstallOptions, certDir)
	opts.TLSOpts = []func(*tls.Config){certs.MinTLSVersion(tls.VersionTLS13)}
	mgr, err := manager.New(env.Config, manager.Options{
		Scheme:        scheme,
		Metrics:       metricsserver.Options{BindAddress: "0"},
		WebhookServer: crwebhook.NewServer(opts),
	})
	if err != nil {
		return nil, err
	}
	if err := webhook.Install(mgr, &v1.Gizmo{}, gizmoDefaulter, gizmoValidator(mgr.GetAPIReader())); err != nil {
		return nil, err
	}
	// The builder registers "/convert" because v1 is a Hub and v1alpha1 Convertible.
	if err := builder.WebhookManagedBy(mgr, &v1.Gizmo{}).Complete(); err != nil {
		return nil, err
	}
	panics, err := webhook.NewValidatingWebhook(scheme, &v1.Gizmo{}, webhook.Validator[*v1.Gizmo]{
		Create: func(context.Context, *v1.Gizmo) (admission.Warnings, field.ErrorList) { panic("boom") },
	})
	if err != nil {
		return nil, err
	}
	mgr.GetWebhookServer().Register(panicPath, panics)
	if err := mgr.Add(rotator); err != nil {
		return nil, err
	}
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(ctx) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/", http.NoBody)
		if err := mgr.GetWebhookServer().StartedChecker()(req); err == nil {
			return stopped, nil
		} else if time.Now().After(deadline) {
			return nil, fmt.Errorf("webhook server not started: %w", err)
		}
		select {
		case err := <-stopped:
			return nil, fmt.Errorf("manager stopped: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func gizmoRule() admissionregistrationv1.RuleWithOperations {
	return admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete},
		Rule: admissionregistrationv1.Rule{
			APIGroups: []string{v1.GroupVersion.Group}, APIVersions: []string{"v1"}, Resources: []string{"gizmos"},
		},
	}
}

// clientConfig names a Service as a real deployment would; envtest rewrites
// it to a URL on its local serving host and port (the path without its
// leading slash, as envtest joins it with one).
func clientConfig(path string) admissionregistrationv1.WebhookClientConfig {
	return admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
		Namespace: "system", Name: "webhook-service", Path: ptr.To(strings.TrimPrefix(path, "/")),
	}}
}

func validatingConfiguration() *admissionregistrationv1.ValidatingWebhookConfiguration {
	c := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	c.Name = validatingConfig
	c.Webhooks = []admissionregistrationv1.ValidatingWebhook{{
		Name:                    "vgizmo.test.opkit.dev",
		ClientConfig:            clientConfig(webhook.ValidatePath(gvk)),
		Rules:                   []admissionregistrationv1.RuleWithOperations{gizmoRule()},
		FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
		MatchPolicy:             ptr.To(admissionregistrationv1.Equivalent),
		SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
		TimeoutSeconds:          ptr.To[int32](10),
		AdmissionReviewVersions: []string{"v1"},
	}}
	return c
}

func mutatingConfiguration() *admissionregistrationv1.MutatingWebhookConfiguration {
	c := &admissionregistrationv1.MutatingWebhookConfiguration{}
	c.Name = mutatingConfig
	c.Webhooks = []admissionregistrationv1.MutatingWebhook{{
		Name:                    "mgizmo.test.opkit.dev",
		ClientConfig:            clientConfig(webhook.MutatePath(gvk)),
		Rules:                   []admissionregistrationv1.RuleWithOperations{gizmoRule()},
		FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
		MatchPolicy:             ptr.To(admissionregistrationv1.Equivalent),
		SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
		TimeoutSeconds:          ptr.To[int32](10),
		ReinvocationPolicy:      ptr.To(admissionregistrationv1.NeverReinvocationPolicy),
		AdmissionReviewVersions: []string{"v1"},
	}}
	return c
}

func testCtx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// webhookClient talks HTTPS to the webhook server, trusting the Rotator's bundle.
func webhookClient(t *testing.T) (*http.Client, string) {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(rotator.CABundle()) {
		t.Fatal("rotator bundle holds no certificate")
	}
	w := env.Envtest.WebhookInstallOptions
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}, fmt.Sprintf("https://%s:%d", w.LocalServingHost, w.LocalServingPort)
}

func newGizmo(ns, name string) *v1.Gizmo {
	g := &v1.Gizmo{}
	g.Namespace, g.Name = ns, name
	g.Spec.Source.Image = "registry.example/gizmo:1"
	return g
}
