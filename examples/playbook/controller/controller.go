// Package controller is the playbook example's controller: Sites reconciled
// by an Ansible playbook through opkit's reconciler.Builder.Playbook.
package controller

import (
	"errors"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/opkit/opkit/ansible"
	webv1 "github.com/opkit/opkit/examples/playbook/api/v1"
	"github.com/opkit/opkit/observability"
	"github.com/opkit/opkit/reconciler"
)

// Name is the controller's name (metrics, events, logs).
const Name = "site"

// The playbooks create the Site's ConfigMap, Deployment and Service with the
// operator's identity, so its role holds those rights too.
//
// +kubebuilder:rbac:groups=web.example.com,resources=sites,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=web.example.com,resources=sites/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=web.example.com,resources=sites/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=configmaps;services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Options are the controller's optional settings.
type Options struct {
	// Observability, when set, wires metrics and events (one Warning event
	// per failed task).
	Observability *observability.Observability
	// RateLimiter spaces the retries of failed runs; nil means
	// reconciler.DefaultRateLimiter (exponential, 5ms to 30s per Site).
	RateLimiter workqueue.TypedRateLimiter[reconcile.Request]
}

// Setup registers the Site controller with mgr: every reconcile of a live
// Site runs runner's playbook, deleting one runs its finalizer playbook, and
// at most runner.Watch().MaxConcurrent Sites are reconciled at once.
func Setup(mgr manager.Manager, runner *ansible.Runner, opts Options) error {
	if runner == nil {
		return errors.New("site controller: nil runner")
	}
	b := reconciler.For(mgr, Name, func() *webv1.Site { return &webv1.Site{} }).
		Playbook(runner).
		WithOptions(controller.Options{MaxConcurrentReconciles: runner.Watch().MaxConcurrent, RateLimiter: opts.RateLimiter})
	if opts.Observability != nil {
		b = b.Observability(opts.Observability)
	}
	return b.Complete()
}
