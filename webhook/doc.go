// Package webhook provides typed admission webhooks for Kubernetes operators
// on top of controller-runtime's admission.Validator[T] / admission.Defaulter[T]:
// validation that returns field.ErrorList with exact paths, rule helpers, and
// a guard that turns every malformed request into a clear denial.
//
// # Guarantees
//
//   - One denial per request: every field error a [Validator] function returns
//     is aggregated with apierrors.NewInvalid into a single 422 Invalid status,
//     so the API server (and kubectl) report every field path, e.g.
//     `Gizmo.test.opkit.dev "x" is invalid: [spec.size: Invalid value: 11: must
//     be between 1 and 10, inclusive, spec.source.image: Forbidden: ...]`.
//   - Create, update and delete are validated by separate functions; an unset
//     function allows its operation.
//   - Warnings (admission.Warnings) reach the client whether the request is
//     allowed or denied.
//   - Never a 500, never a crash: webhooks built by [NewValidatingWebhook],
//     [NewDefaultingWebhook] and [Install] deny malformed requests (wrong kind,
//     missing object or oldObject, undecodable object, unknown operation) with
//     the request field at fault (request.kind, request.object, ...); a panic in
//     a [Validator] or [DefaultFunc] is recovered and denies the request with a
//     message naming the object; any other 5xx answer is downgraded to 403.
//     Garbage that is not an AdmissionReview at all is denied with 400 by
//     controller-runtime before any handler runs. HTTP status is always 200.
//   - Defaulting is yours to keep deterministic and idempotent; check it in one
//     line with webhooktest.DefaultingIsIdempotent.
//
// # Usage
//
//	v := webhook.Validator[*v1.Gizmo]{
//		Create: func(ctx context.Context, g *v1.Gizmo) (admission.Warnings, field.ErrorList) {
//			p := field.NewPath("spec")
//			errs := webhook.InRange(p.Child("size"), *g.Spec.Size, 1, 10)
//			errs = append(errs, webhook.ExactlyOneOf(p.Child("source"),
//				webhook.Member("git", g.Spec.Source.Git != ""),
//				webhook.Member("image", g.Spec.Source.Image != ""))...)
//			return nil, errs
//		},
//		Update: func(ctx context.Context, old, g *v1.Gizmo) (admission.Warnings, field.ErrorList) {
//			return nil, webhook.Immutable(field.NewPath("spec", "region"), old.Spec.Region, g.Spec.Region)
//		},
//	}
//	err := webhook.Install(mgr, &v1.Gizmo{}, webhook.DefaultFunc[*v1.Gizmo](setDefaults), v)
//
// [Install] serves at the paths kubebuilder markers and controller-runtime's
// builder use ([MutatePath], [ValidatePath]); Validator and DefaultFunc also
// plug into builder.WebhookManagedBy(mgr, obj).WithValidator(v).WithDefaulter(d),
// in which case malformed requests get controller-runtime's (still 4xx) messages.
//
// Sub-packages: webhook/conversion (lossless hub/spoke conversion via an
// annotation), webhook/certs (self-signed CA, serving certificates, caBundle
// injection and rotation without cert-manager), webhook/webhooktest (one-line
// defaulting-idempotence and conversion fuzz helpers, testenv serving options).
//
// # Configuring the webhooks
//
//   - failurePolicy: Fail for validation and defaulting that enforce
//     invariants (the API server rejects requests while the webhook is down,
//     which is what keeps invalid objects out); Ignore only for advisory
//     webhooks (warnings, best-effort defaults), and never for a defaulter whose
//     output a validator or controller depends on.
//   - timeoutSeconds: keep it short (2–10s; the API server's default and
//     maximum are 10s and 30s). A [ReferenceExists] lookup should read from
//     the manager's cache so it does not add an API round trip per request.
//   - sideEffects: None. These handlers write nothing, which also makes them
//     safe for dry-run requests.
//   - matchPolicy: Equivalent, and rules for the hub version only: the API
//     server converts requests for other versions to the hub before calling, so
//     one typed webhook covers every version.
//   - admissionReviewVersions: ["v1"].
//
// # TLS
//
// The API server only calls webhooks over HTTPS with a certificate it can
// verify against the configuration's caBundle. In a real cluster, use
// cert-manager: a Certificate for the webhook Service's DNS names (see
// certs.ServiceHosts) written to the Secret mounted at the webhook server's
// CertDir, and the annotation
//
//	cert-manager.io/inject-ca-from: <namespace>/<certificate-name>
//
// on the ValidatingWebhookConfiguration, MutatingWebhookConfiguration and on
// every CRD with a conversion webhook, so cert-manager's cainjector fills in
// caBundle. Without cert-manager (local runs, tests, single-replica operators)
// use certs.Rotator. Either way, controller-runtime's webhook server reloads
// tls.crt/tls.key from CertDir when they change. Its minimum TLS version is
// Go's default, 1.2; pass certs.MinTLSVersion(tls.VersionTLS13) in
// webhook.Options.TLSOpts to require 1.3.
package webhook
