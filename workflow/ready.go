package workflow

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Readiness is a readiness check's verdict on a live object.
type Readiness struct {
	// Ready: dependents may proceed.
	Ready bool
	// Failed: not ready, and it will not become ready without a change to
	// the object (a Job that failed). The node fails terminally. Ignored
	// when Ready is set.
	Failed bool
	// Reason is CamelCase, usable as a condition reason ("" gives "Ready",
	// "NotReady" or "Failed").
	Reason string
	// Message says why, for a human.
	Message string
}

// ReadyFunc judges a live object, as read from the cache (typed when the
// node's Object is typed, *unstructured.Unstructured when it is). It must not
// modify obj and must not make requests.
type ReadyFunc func(obj client.Object) Readiness

// ready and notReady build verdicts.
func ready(reason, format string, args ...any) Readiness {
	return Readiness{Ready: true, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

func notReady(reason, format string, args ...any) Readiness {
	return Readiness{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

func failed(reason, format string, args ...any) Readiness {
	return Readiness{Failed: true, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

var (
	gkDeployment  = schema.GroupKind{Group: "apps", Kind: "Deployment"}
	gkStatefulSet = schema.GroupKind{Group: "apps", Kind: "StatefulSet"}
	gkDaemonSet   = schema.GroupKind{Group: "apps", Kind: "DaemonSet"}
	gkJob         = schema.GroupKind{Group: "batch", Kind: "Job"}
	gkPVC         = schema.GroupKind{Kind: "PersistentVolumeClaim"}
	gkService     = schema.GroupKind{Kind: "Service"}
	gkCRD         = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}
)

// Default is the readiness check of a node without one: [DeploymentReady],
// [StatefulSetReady], [DaemonSetReady], [JobReady], [PVCReady],
// [ServiceReady] and [CRDReady] for those kinds, typed or unstructured, and
// [KStatusCurrent] for every other kind.
func Default(obj client.Object) Readiness {
	switch obj.(type) {
	case *appsv1.Deployment:
		return DeploymentReady(obj)
	case *appsv1.StatefulSet:
		return StatefulSetReady(obj)
	case *appsv1.DaemonSet:
		return DaemonSetReady(obj)
	case *batchv1.Job:
		return JobReady(obj)
	case *corev1.PersistentVolumeClaim:
		return PVCReady(obj)
	case *corev1.Service:
		return ServiceReady(obj)
	case *apiextensionsv1.CustomResourceDefinition:
		return CRDReady(obj)
	case *unstructured.Unstructured:
		switch obj.GetObjectKind().GroupVersionKind().GroupKind() {
		case gkDeployment:
			return DeploymentReady(obj)
		case gkStatefulSet:
			return StatefulSetReady(obj)
		case gkDaemonSet:
			return DaemonSetReady(obj)
		case gkJob:
			return JobReady(obj)
		case gkPVC:
			return PVCReady(obj)
		case gkService:
			return ServiceReady(obj)
		case gkCRD:
			return CRDReady(obj)
		}
	}
	return KStatusCurrent(obj)
}

// as returns obj as a *T, converting an unstructured object; ok is false for
// any other type.
func as[T any, PT interface {
	*T
	client.Object
}](obj client.Object) (PT, bool) {
	if t, ok := obj.(PT); ok {
		return t, true
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, false
	}
	t := PT(new(T))
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, t); err != nil {
		return nil, false
	}
	return t, true
}

func wrongType(obj client.Object, want string) Readiness {
	return failed("WrongKind", "readiness check for %s given %T", want, obj)
}

// DeploymentReady is ready when the Deployment controller has observed the current
// generation, every replica runs the current template (updatedReplicas ==
// spec.replicas, no old replicas left: status.replicas == updatedReplicas),
// they are all available, and the Available condition is True — what
// `kubectl rollout status` waits for. A rollout past its progress deadline
// (Progressing=False, ProgressDeadlineExceeded) is not ready with that
// reason, not failed: the Deployment controller keeps trying, and a fix to
// the template or the cluster resumes it.
func DeploymentReady(obj client.Object) Readiness {
	d, ok := as[appsv1.Deployment](obj)
	if !ok {
		return wrongType(obj, "Deployment")
	}
	if d.Status.ObservedGeneration < d.Generation {
		return notReady("RolloutPending", "generation %d not yet observed (observed %d)", d.Generation, d.Status.ObservedGeneration)
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded" {
			return notReady("ProgressDeadlineExceeded", "rollout exceeded its progress deadline: %s", c.Message)
		}
	}
	switch s := d.Status; {
	case s.UpdatedReplicas < want:
		return notReady("RollingOut", "%d of %d replicas updated", s.UpdatedReplicas, want)
	case s.Replicas > s.UpdatedReplicas:
		return notReady("RollingOut", "%d old replicas pending termination", s.Replicas-s.UpdatedReplicas)
	case s.AvailableReplicas < s.UpdatedReplicas:
		return notReady("RollingOut", "%d of %d updated replicas available", s.AvailableReplicas, s.UpdatedReplicas)
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			if c.Status == corev1.ConditionTrue {
				return ready("Available", "%d/%d replicas available", d.Status.AvailableReplicas, want)
			}
			return notReady("Unavailable", "Available=%s: %s", c.Status, c.Message)
		}
	}
	return notReady("Unavailable", "no Available condition yet")
}

// StatefulSetReady is ready when the StatefulSet controller has observed the current
// generation and all spec.replicas are ready; with a RollingUpdate partition
// p, the pods with ordinal ≥ p run the update revision (updatedReplicas ≥
// replicas − p) and the others may stay on the old revision; without one,
// the update is complete (currentRevision == updateRevision). With the
// OnDelete strategy only readiness counts (updates wait for someone to delete
// pods).
func StatefulSetReady(obj client.Object) Readiness {
	s, ok := as[appsv1.StatefulSet](obj)
	if !ok {
		return wrongType(obj, "StatefulSet")
	}
	if s.Status.ObservedGeneration < s.Generation {
		return notReady("RolloutPending", "generation %d not yet observed (observed %d)", s.Generation, s.Status.ObservedGeneration)
	}
	want := int32(1)
	if s.Spec.Replicas != nil {
		want = *s.Spec.Replicas
	}
	if s.Status.ReadyReplicas < want {
		return notReady("ReplicasNotReady", "%d of %d replicas ready", s.Status.ReadyReplicas, want)
	}
	if s.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		return ready("Ready", "%d/%d replicas ready (OnDelete updates)", s.Status.ReadyReplicas, want)
	}
	partition := int32(0)
	if ru := s.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
		partition = *ru.Partition
	}
	if partition > 0 {
		if target := want - partition; s.Status.UpdatedReplicas < target {
			return notReady("RollingOut", "%d of %d replicas above partition %d updated", s.Status.UpdatedReplicas, max(target, 0), partition)
		}
		return ready("Ready", "%d/%d replicas ready, partition %d rolled out", s.Status.ReadyReplicas, want, partition)
	}
	if s.Status.UpdateRevision != "" && s.Status.CurrentRevision != s.Status.UpdateRevision {
		return notReady("RollingOut", "%d of %d replicas at revision %s", s.Status.UpdatedReplicas, want, s.Status.UpdateRevision)
	}
	return ready("Ready", "%d/%d replicas ready", s.Status.ReadyReplicas, want)
}

// DaemonSetReady is ready when the DaemonSet controller has observed the current
// generation, every node that should run a pod runs the current template
// (updatedNumberScheduled == desiredNumberScheduled) and every such pod is
// available.
func DaemonSetReady(obj client.Object) Readiness {
	d, ok := as[appsv1.DaemonSet](obj)
	if !ok {
		return wrongType(obj, "DaemonSet")
	}
	s := d.Status
	switch {
	case s.ObservedGeneration < d.Generation:
		return notReady("RolloutPending", "generation %d not yet observed (observed %d)", d.Generation, s.ObservedGeneration)
	case s.UpdatedNumberScheduled < s.DesiredNumberScheduled:
		return notReady("RollingOut", "%d of %d pods updated", s.UpdatedNumberScheduled, s.DesiredNumberScheduled)
	case s.NumberAvailable < s.DesiredNumberScheduled:
		return notReady("RollingOut", "%d of %d pods available", s.NumberAvailable, s.DesiredNumberScheduled)
	}
	return ready("Ready", "%d/%d pods available", s.NumberAvailable, s.DesiredNumberScheduled)
}

// JobReady judges a Job: Complete=True is ready; Failed=True is a terminal failure (a Job
// does not run again after it failed; delete it, or change its declaration
// with ensure's recreate option, to run it again); anything else is not
// ready yet.
func JobReady(obj client.Object) Readiness {
	j, ok := as[batchv1.Job](obj)
	if !ok {
		return wrongType(obj, "Job")
	}
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return ready("Complete", "%d succeeded", j.Status.Succeeded)
		case batchv1.JobFailed:
			return failed(nonEmpty(c.Reason, "JobFailed"), "Job failed: %s", c.Message)
		}
	}
	return notReady("Running", "%d active, %d succeeded, %d failed", j.Status.Active, j.Status.Succeeded, j.Status.Failed)
}

// PVCReady judges a PersistentVolumeClaim: phase Bound is ready; Lost (the bound volume is gone) is a
// terminal failure; Pending is not ready.
func PVCReady(obj client.Object) Readiness {
	p, ok := as[corev1.PersistentVolumeClaim](obj)
	if !ok {
		return wrongType(obj, "PersistentVolumeClaim")
	}
	switch p.Status.Phase {
	case corev1.ClaimBound:
		return ready("Bound", "bound to %s", p.Spec.VolumeName)
	case corev1.ClaimLost:
		return failed("Lost", "bound volume %s is lost", p.Spec.VolumeName)
	}
	return notReady("Pending", "phase %q", p.Status.Phase)
}

// ServiceReady judges a Service: one of type LoadBalancer is ready once
// status.loadBalancer.ingress has an address; any other Service is ready as
// soon as it exists (its endpoints follow the pods it selects, which a
// dependency on their workload already waits for).
func ServiceReady(obj client.Object) Readiness {
	s, ok := as[corev1.Service](obj)
	if !ok {
		return wrongType(obj, "Service")
	}
	if s.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return ready("Ready", "type %s", nonEmpty(string(s.Spec.Type), string(corev1.ServiceTypeClusterIP)))
	}
	for _, in := range s.Status.LoadBalancer.Ingress {
		if in.IP != "" || in.Hostname != "" {
			return ready("Ready", "load balancer at %s", nonEmpty(in.IP, in.Hostname))
		}
	}
	return notReady("LoadBalancerPending", "no load balancer address yet")
}

// CRDReady judges a CustomResourceDefinition: Established=True is ready; NamesAccepted=False (the names clash
// with another CRD's) is a terminal failure; anything else is not ready.
func CRDReady(obj client.Object) Readiness {
	c, ok := as[apiextensionsv1.CustomResourceDefinition](obj)
	if !ok {
		return wrongType(obj, "CustomResourceDefinition")
	}
	for _, cond := range c.Status.Conditions {
		if cond.Type == apiextensionsv1.NamesAccepted && cond.Status == apiextensionsv1.ConditionFalse {
			return failed(nonEmpty(cond.Reason, "NamesNotAccepted"), "names not accepted: %s", cond.Message)
		}
	}
	for _, cond := range c.Status.Conditions {
		if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
			return ready("Established", "established")
		}
	}
	return notReady("NotEstablished", "not established yet")
}

// KStatusCurrent is ready when kstatus (sigs.k8s.io/cli-utils/pkg/kstatus)
// computes Current — for a custom resource, typically Ready=True at the
// current observedGeneration, or no conditions at all; for a ConfigMap or
// Secret, existing. Any other kstatus status (InProgress, Failed,
// Terminating) is not ready, with that status as reason and kstatus's
// message: kstatus Failed is not terminal, since the object's own controller
// may still recover.
func KStatusCurrent(obj client.Object) Readiness {
	var u *unstructured.Unstructured
	if x, ok := obj.(*unstructured.Unstructured); ok {
		u = x
	} else {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return notReady("Unknown", "cannot read %T: %v", obj, err)
		}
		u = &unstructured.Unstructured{Object: m}
	}
	res, err := status.Compute(u)
	if err != nil {
		return notReady("Unknown", "kstatus: %v", err)
	}
	if res.Status == status.CurrentStatus {
		return ready("Current", "%s", res.Message)
	}
	return notReady(string(res.Status), "%s", res.Message)
}
