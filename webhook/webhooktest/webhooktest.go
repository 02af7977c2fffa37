package webhooktest

import (
	"context"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// DefaultingIsIdempotent checks, for each object, that d is deterministic
// (defaulting two copies gives equal results) and idempotent (defaulting the
// defaulted object again changes nothing), comparing with go-cmp; nil and
// empty slices and maps compare equal, as they do once encoded. The objects
// themselves are not modified. The context carries an admission CREATE request
// for the object, so defaulters that call admission.RequestFromContext work.
// A Default error is reported as a test error.
func DefaultingIsIdempotent[T runtime.Object](tb testing.TB, d admission.Defaulter[T], objs ...T) {
	tb.Helper()
	for i, obj := range objs {
		ctx := admission.NewContextWithRequest(context.Background(), admission.Request{
			AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create},
		})
		first := obj.DeepCopyObject().(T)
		if err := d.Default(ctx, first); err != nil {
			tb.Errorf("object %d: Default: %v", i, err)
			continue
		}
		again := obj.DeepCopyObject().(T)
		if err := d.Default(ctx, again); err != nil {
			tb.Errorf("object %d: Default (second copy): %v", i, err)
			continue
		}
		if diff := cmp.Diff(first, again, cmpopts.EquateEmpty()); diff != "" {
			tb.Errorf("object %d: defaulting is not deterministic: two copies of the same object differ (-first +second):\n%s", i, diff)
		}
		second := first.DeepCopyObject().(T)
		if err := d.Default(ctx, second); err != nil {
			tb.Errorf("object %d: Default of the defaulted object: %v", i, err)
			continue
		}
		if diff := cmp.Diff(first, second, cmpopts.EquateEmpty()); diff != "" {
			tb.Errorf("object %d: defaulting is not idempotent: a second pass changed the object (-defaulted once +defaulted twice):\n%s", i, diff)
		}
	}
}

// ServerOptions returns webhook server options that serve where a testenv
// (envtest) control plane calls its webhooks: envtest's local host and port,
// and its cert directory (pass another dir, e.g. a certs.Rotator's, to serve
// certificates of your own, then inject their CA into the configurations).
// Use it as manager.Options{WebhookServer: webhook.NewServer(opts)}.
func ServerOptions(w envtest.WebhookInstallOptions, certDir ...string) webhook.Options {
	o := webhook.Options{Host: w.LocalServingHost, Port: w.LocalServingPort, CertDir: w.LocalServingCertDir}
	if len(certDir) > 0 {
		o.CertDir = certDir[0]
	}
	return o
}

func newOf[T runtime.Object](proto T) T {
	t := reflect.TypeOf(proto)
	if t.Kind() == reflect.Pointer {
		return reflect.New(t.Elem()).Interface().(T)
	}
	var zero T
	return zero
}
