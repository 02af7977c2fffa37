package certs

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Event describes one [Rotator] pass that changed something, or failed.
type Event struct {
	// CAIssued: a new CA was created and published in the bundle (it signs
	// serving certificates only after the propagation delay).
	CAIssued bool
	// CertIssued: a new serving certificate was written to the cert directory.
	CertIssued bool
	// BundleInjected: the targets' caBundle was updated (a CA was added or an
	// expired one removed).
	BundleInjected bool
	// CertNotAfter is the current serving certificate's expiry.
	CertNotAfter time.Time
	// Err is the pass's error; the Rotator retries at its next check.
	Err error
}

// Observer is told about each [Rotator] pass that did something or failed.
// The default does nothing. Implementations must be fast and must not block.
type Observer interface {
	Rotated(Event)
}

type nopObserver struct{}

func (nopObserver) Rotated(Event) {}

type rotatorOptions struct {
	certDir          string
	hosts            []string
	caValidity       time.Duration
	caRenewBefore    time.Duration
	certValidity     time.Duration
	certRenewBefore  time.Duration
	checkInterval    time.Duration
	propagationDelay time.Duration
	targets          Targets
	observer         Observer
}

// RotatorOption configures [NewRotator].
type RotatorOption func(*rotatorOptions)

// WithCertDir is where the serving key pair and CA bundle are written, as
// [KeyFile], [CertFile] and [CAFile]: set the webhook server's
// webhook.Options.CertDir to the same directory. Required.
func WithCertDir(dir string) RotatorOption { return func(o *rotatorOptions) { o.certDir = dir } }

// WithHosts sets the serving certificate's SANs (default [LocalHosts]; in a
// cluster use [ServiceHosts] of the webhook Service).
func WithHosts(hosts ...string) RotatorOption {
	return func(o *rotatorOptions) { o.hosts = append([]string(nil), hosts...) }
}

// WithCAValidity sets how long each CA is valid (default 365 days) and how
// long before its expiry a successor is created (default a third of it).
func WithCAValidity(validity, renewBefore time.Duration) RotatorOption {
	return func(o *rotatorOptions) { o.caValidity, o.caRenewBefore = validity, renewBefore }
}

// WithCertValidity sets how long each serving certificate is valid (default 7
// days) and how long before its expiry it is replaced (default a third of it).
// X.509 times have one-second precision, so windows shorter than a few
// seconds (useful only in tests) are coarse.
func WithCertValidity(validity, renewBefore time.Duration) RotatorOption {
	return func(o *rotatorOptions) { o.certValidity, o.certRenewBefore = validity, renewBefore }
}

// WithCheckInterval sets how often the Rotator checks expiries (default 1 minute).
func WithCheckInterval(d time.Duration) RotatorOption {
	return func(o *rotatorOptions) { o.checkInterval = d }
}

// WithPropagationDelay is how long a new CA is published in the bundle before
// it signs the serving certificate (default 30s), so every API server has
// seen the new bundle before it is needed. The API server watches webhook
// configurations and CRDs; it normally sees a change within a second.
func WithPropagationDelay(d time.Duration) RotatorOption {
	return func(o *rotatorOptions) { o.propagationDelay = d }
}

// WithTargets names the webhook configurations and CRDs whose caBundle the
// Rotator keeps current. Without targets it only writes files.
func WithTargets(t Targets) RotatorOption { return func(o *rotatorOptions) { o.targets = t } }

// WithObserver receives an [Event] for each pass that did something or failed.
func WithObserver(obs Observer) RotatorOption { return func(o *rotatorOptions) { o.observer = obs } }

// Rotator keeps a self-signed CA and serving certificate for a webhook server
// valid, without cert-manager. It is a manager.Runnable that does not need
// leader election: every replica serves with its own files.
//
// Guarantees:
//   - The serving certificate is replaced when less than its renew-before
//     window remains, signed by the current CA, and written atomically to the
//     cert directory, where controller-runtime's certwatcher picks it up.
//   - The caBundle of every target lists every CA whose certificates may still
//     be served: a new CA is added renew-before ahead of the old CA's expiry,
//     it signs serving certificates only after the propagation delay, and the
//     old CA leaves the bundle only when it expires. A request in flight, or an
//     API server that has not yet seen the latest bundle, therefore always
//     finds the CA of the certificate it is shown.
//   - The CA's private key never leaves memory. A restarted process starts a
//     new CA and overwrites the bundle, which is safe because the webhook
//     server serves only this process's certificates.
//
// Limits: replicas each generate their own CA and would overwrite each other's
// bundle; run one replica (development, tests, single-replica operators) or use
// cert-manager in a real cluster (see the package documentation).
type Rotator struct {
	c client.Client
	o rotatorOptions

	mu         sync.Mutex
	ca         *CA
	pending    *CA
	pendingAt  time.Time // when pending was published; zero until injected
	trusted    []*x509.Certificate
	cert       *x509.Certificate
	injected   []byte
	injectedOK bool
}

var _ manager.Runnable = (*Rotator)(nil)

// NewRotator configures a Rotator. c writes the targets' caBundle; it should
// read live (client.New), since [Rotator.Ensure] runs before a manager's cache
// starts. It fails when the certificate directory is missing or the windows
// leave no room to rotate (each renew-before must exceed two check intervals,
// and the CA's must also exceed the propagation delay plus the certificate's).
func NewRotator(c client.Client, opts ...RotatorOption) (*Rotator, error) {
	o := rotatorOptions{
		hosts:            LocalHosts(),
		caValidity:       365 * 24 * time.Hour,
		certValidity:     7 * 24 * time.Hour,
		checkInterval:    time.Minute,
		propagationDelay: 30 * time.Second,
		observer:         nopObserver{},
	}
	for _, opt := range opts {
		opt(&o)
	}
	if o.caRenewBefore == 0 {
		o.caRenewBefore = o.caValidity / 3
	}
	if o.certRenewBefore == 0 {
		o.certRenewBefore = o.certValidity / 3
	}
	switch {
	case o.certDir == "":
		return nil, errors.New("certs: rotator: WithCertDir is required")
	case c == nil && !o.targets.empty():
		return nil, errors.New("certs: rotator: a client is required to inject caBundles")
	case o.checkInterval <= 0 || o.caValidity <= 0 || o.certValidity <= 0:
		return nil, errors.New("certs: rotator: validities and check interval must be positive")
	case o.certRenewBefore >= o.certValidity || o.caRenewBefore >= o.caValidity:
		return nil, errors.New("certs: rotator: renew-before must be shorter than the validity")
	case o.certRenewBefore <= 2*o.checkInterval:
		return nil, fmt.Errorf("certs: rotator: certificate renew-before %s must exceed two check intervals (%s)", o.certRenewBefore, 2*o.checkInterval)
	case o.caRenewBefore <= o.propagationDelay+o.certRenewBefore+2*o.checkInterval:
		return nil, fmt.Errorf("certs: rotator: CA renew-before %s must exceed propagation delay + certificate renew-before + two check intervals (%s)",
			o.caRenewBefore, o.propagationDelay+o.certRenewBefore+2*o.checkInterval)
	}
	if o.observer == nil {
		o.observer = nopObserver{}
	}
	return &Rotator{c: c, o: o}, nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: false.
func (r *Rotator) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable: it runs [Rotator.Ensure] every check
// interval until ctx ends. A failed pass is reported to the observer and
// retried at the next check; Start returns nil when ctx ends.
func (r *Rotator) Start(ctx context.Context) error {
	t := time.NewTicker(r.o.checkInterval)
	defer t.Stop()
	for {
		_ = r.Ensure(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Ensure runs one rotation pass: it creates the CA and serving certificate on
// first use, promotes a published successor CA after the propagation delay,
// publishes a successor when the CA is within its renew-before window,
// removes expired CAs from the bundle, re-injects the bundle when it changed,
// and replaces the serving certificate when it is within its window. Call it
// once before starting the webhook server, which needs the files to exist.
func (r *Rotator) Ensure(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	ev, err := r.ensure(ctx)
	ev.Err = err
	if r.cert != nil {
		ev.CertNotAfter = r.cert.NotAfter
	}
	if err != nil || ev.CAIssued || ev.CertIssued || ev.BundleInjected {
		r.o.observer.Rotated(ev)
	}
	return err
}

func (r *Rotator) ensure(ctx context.Context) (Event, error) {
	var ev Event
	now := time.Now()
	issue := false
	if r.ca == nil {
		ca, err := NewCA("opkit-webhook-ca", r.o.caValidity)
		if err != nil {
			return ev, err
		}
		r.ca, r.trusted, issue = ca, []*x509.Certificate{ca.Cert}, true
		ev.CAIssued = true
	}
	// Promote the successor only once the API servers have had time to see it.
	if r.pending != nil && !r.pendingAt.IsZero() && now.Sub(r.pendingAt) >= r.o.propagationDelay {
		r.ca, r.pending, r.pendingAt, issue = r.pending, nil, time.Time{}, true
	}
	if r.pending == nil && r.ca.Cert.NotAfter.Sub(now) < r.o.caRenewBefore {
		ca, err := NewCA("opkit-webhook-ca", r.o.caValidity)
		if err != nil {
			return ev, err
		}
		r.pending = ca
		r.trusted = append([]*x509.Certificate{ca.Cert}, r.trusted...)
		ev.CAIssued = true
	}
	live := r.trusted[:0]
	for _, c := range r.trusted {
		if c.NotAfter.After(now) {
			live = append(live, c)
		}
	}
	r.trusted = live
	bundle := Bundle(r.trusted...)
	if !r.injectedOK || !bytes.Equal(bundle, r.injected) {
		if !r.o.targets.empty() {
			if err := Inject(ctx, r.c, bundle, r.o.targets); err != nil {
				r.injectedOK = false
				return ev, err
			}
			ev.BundleInjected = true
		}
		r.injected, r.injectedOK = bundle, true
	}
	if r.pending != nil && r.pendingAt.IsZero() {
		r.pendingAt = now
	}
	if !issue && r.cert != nil {
		left := r.cert.NotAfter.Sub(now)
		// A certificate capped at the CA's expiry cannot be extended by the
		// same CA; wait for the successor instead of reissuing every pass.
		issue = left < r.o.certRenewBefore && r.ca.Cert.NotAfter.After(r.cert.NotAfter)
	}
	if issue || r.cert == nil {
		kp, err := r.ca.Issue(r.o.hosts, r.o.certValidity)
		if err != nil {
			return ev, err
		}
		if err := WriteFiles(r.o.certDir, kp, bundle); err != nil {
			return ev, err
		}
		r.cert = kp.Cert
		ev.CertIssued = true
	}
	return ev, nil
}

// CABundle returns the PEM bundle the targets were last given (empty before
// the first successful [Rotator.Ensure]).
func (r *Rotator) CABundle() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Clone(r.injected)
}
