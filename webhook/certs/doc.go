// Package certs makes webhook TLS work without cert-manager: a self-signed CA
// and serving certificates (ECDSA P-256), files where controller-runtime's
// webhook server reads them, caBundle injection into webhook configurations
// and CRD conversion webhooks, and a [Rotator] that renews before expiry.
//
// Guarantees:
//   - Serving certificates carry the SANs asked for (DNS names and IP
//     addresses; [LocalHosts] and [ServiceHosts] give the usual sets), server
//     auth usage only, and never outlive their CA.
//   - [WriteFiles] replaces each file atomically; the key file is 0600. CA
//     private keys are never written.
//   - [Inject] updates only objects whose caBundle differs, retrying conflicts.
//   - [Rotator] renews the serving certificate inside its renewal window and
//     keeps every CA whose certificates may still be presented in the bundle
//     (old and new CA side by side during a CA hand-over), so requests keep
//     succeeding while certificates rotate.
//
// Usage (before mgr.Start, since the webhook server needs the files):
//
//	cl, _ := client.New(cfg, client.Options{Scheme: scheme}) // live reads
//	rot, err := certs.NewRotator(cl,
//		certs.WithCertDir(certDir),
//		certs.WithHosts(certs.ServiceHosts("my-webhook", "my-system")...),
//		certs.WithTargets(certs.Targets{
//			ValidatingWebhookConfigurations: []string{"my-validating"},
//			MutatingWebhookConfigurations:   []string{"my-mutating"},
//			CRDs:                            []string{"gizmos.example.com"},
//		}))
//	if err := rot.Ensure(ctx); err != nil { ... }
//	_ = mgr.Add(rot)
//	// webhook.NewServer(webhook.Options{CertDir: certDir, TLSOpts: []func(*tls.Config){certs.MinTLSVersion(tls.VersionTLS13)}})
//
// In a real multi-replica deployment use cert-manager instead (see the
// webhook package documentation): replicas running their own Rotator would
// each inject a different CA.
package certs
