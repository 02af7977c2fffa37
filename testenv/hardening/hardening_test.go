package hardening_test

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/opkit/opkit/testenv/hardening"
)

func hardened() *appsv1.Deployment {
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz"}}}
	d := &appsv1.Deployment{}
	d.Spec.Template.Spec = corev1.PodSpec{
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr.To(true),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Containers: []corev1.Container{{
			Name: "manager",
			SecurityContext: &corev1.SecurityContext{
				ReadOnlyRootFilesystem:   ptr.To(true),
				AllowPrivilegeEscalation: ptr.To(false),
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			},
			LivenessProbe: probe, ReadinessProbe: probe,
		}},
	}
	return d
}

func TestEveryShortfallIsReported(t *testing.T) {
	if p := hardening.Deployment(hardened()); len(p) != 0 {
		t.Fatalf("a hardened Deployment has problems: %q", p)
	}
	for name, tc := range map[string]struct {
		mutate func(*appsv1.Deployment)
		want   string
	}{
		"root":       {func(d *appsv1.Deployment) { d.Spec.Template.Spec.SecurityContext.RunAsNonRoot = nil }, "pod must set runAsNonRoot: true"},
		"no seccomp": {func(d *appsv1.Deployment) { d.Spec.Template.Spec.SecurityContext.SeccompProfile = nil }, "pod must use the RuntimeDefault seccomp profile"},
		"writable root": {func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Containers[0].SecurityContext.ReadOnlyRootFilesystem = ptr.To(false)
		}, "container manager must have a read-only root filesystem"},
		"escalation": {func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = nil
		}, "container manager must set allowPrivilegeEscalation: false"},
		"capabilities kept":  {func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].SecurityContext.Capabilities = nil }, "container manager must drop ALL capabilities"},
		"no probes":          {func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].ReadinessProbe = nil }, "container manager needs liveness and readiness probes"},
		"no securityContext": {func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].SecurityContext = nil }, "container manager has no securityContext"},
		"no containers":      {func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers = nil }, "pod has no containers"},
	} {
		d := hardened()
		tc.mutate(d)
		if p := hardening.Deployment(d); len(p) != 1 || p[0] != tc.want {
			t.Errorf("%s: %q, want exactly %q", name, p, tc.want)
		}
	}
}

func ExampleDeployment() {
	d := hardened()
	d.Spec.Template.Spec.SecurityContext = nil
	for _, p := range hardening.Deployment(d) {
		fmt.Println(p)
	}
	// Output:
	// pod must set runAsNonRoot: true
	// pod must use the RuntimeDefault seccomp profile
}
