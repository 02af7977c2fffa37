package helm

import "sigs.k8s.io/controller-runtime/pkg/client"

// Object is a custom resource whose reconcile renders and releases a chart:
// any client.Object whose status holds a [ReleaseStatus], returned by
// HelmRelease (a pointer into the object, so that what the [Releaser] writes
// there reaches the status write of the reconcile).
type Object interface {
	client.Object
	// HelmRelease returns the object's release status, never nil.
	HelmRelease() *ReleaseStatus
}

// ReleaseStatus is the part of a custom resource's status that says which
// Helm release the operator last made of it. Embed it in the status struct
// (e.g. `Release helm.ReleaseStatus `json:"release,omitempty"“).
// +kubebuilder:object:generate=false
type ReleaseStatus struct {
	// Name is the Helm release name (the object's name), as `helm list` shows it.
	Name string `json:"name,omitempty"`
	// Revision is the release revision the object is at (or is moving to,
	// while Status is pending-install, pending-upgrade or pending-rollback),
	// as `helm history` numbers it.
	Revision int `json:"revision,omitempty"`
	// Status is the Helm status of that revision: pending-install,
	// pending-upgrade, pending-rollback, deployed or failed.
	Status string `json:"status,omitempty"`
	// Chart is the released chart's name.
	Chart string `json:"chart,omitempty"`
	// ChartVersion is the released chart's version.
	ChartVersion string `json:"chartVersion,omitempty"`
	// AppVersion is the released chart's appVersion.
	AppVersion string `json:"appVersion,omitempty"`
	// Digest identifies the inputs of the revision (chart content and
	// values); a change of either starts a new revision.
	Digest string `json:"digest,omitempty"`
	// RolledBackTo is the revision whose chart and values the release holds
	// while the object carries [AnnotationRollbackTo]; zero otherwise.
	RolledBackTo int `json:"rolledBackTo,omitempty"`
	// FailedObject names the object (Kind namespace/name) or hook whose
	// failure failed the revision; empty unless Status is failed.
	FailedObject string `json:"failedObject,omitempty"`
}

// DeepCopyInto copies s into out.
func (s *ReleaseStatus) DeepCopyInto(out *ReleaseStatus) { *out = *s }

// DeepCopy returns a copy of s.
func (s *ReleaseStatus) DeepCopy() *ReleaseStatus {
	if s == nil {
		return nil
	}
	out := new(ReleaseStatus)
	s.DeepCopyInto(out)
	return out
}

// Conditions and reasons the [Releaser] writes, on top of the reconciler's
// Ready, Reconciling and Stalled (whose reasons are these too).
const (
	// ConditionReleased is True when the current revision is deployed
	// (every rendered object applied and ready, every hook succeeded),
	// False when it failed or the chart cannot be rendered, Unknown while a
	// revision is pending.
	ConditionReleased = "Released"

	// ReasonDeployed: the revision is deployed.
	ReasonDeployed = "Deployed"
	// ReasonPending: a revision is being installed, upgraded or rolled back.
	ReasonPending = "Pending"
	// ReasonRenderFailed: the chart failed to render (template error,
	// unparsable output, incompatible kubeVersion).
	ReasonRenderFailed = "RenderFailed"
	// ReasonInvalidValues: the values fail the chart's values.schema.json.
	ReasonInvalidValues = "InvalidValues"
	// ReasonUnsupportedHook: the chart has a hook this package does not run.
	ReasonUnsupportedHook = "UnsupportedHook"
	// ReasonHookFailed: a hook (a Job) failed; FailedObject names it.
	ReasonHookFailed = "HookFailed"
	// ReasonReleaseFailed: a rendered object could not be applied or
	// reported a terminal failure; FailedObject names it.
	ReasonReleaseFailed = "ReleaseFailed"
	// ReasonRollbackNotFound: [AnnotationRollbackTo] names a revision the
	// release history does not hold.
	ReasonRollbackNotFound = "RollbackRevisionNotFound"
	// ReasonChartError: the ChartFunc or ValuesFunc failed.
	ReasonChartError = "ChartError"
)

// AnnotationRollbackTo is the annotation that, set to a revision number ("3"), rolls
// the release back to that revision: a new revision with that revision's
// chart and values (Helm's rollback; pre-rollback and post-rollback hooks
// run), held — the object's own chart and values are ignored — as long as the
// annotation stays. Removing the annotation upgrades the release to what the
// object declares again.
const AnnotationRollbackTo = "helm.opkit.dev/rollback-to"
