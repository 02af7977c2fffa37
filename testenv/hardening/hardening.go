package hardening

import (
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// Deployment returns every way d's pod template falls short of the baseline,
// one message per shortfall, or nothing when it meets it: the pod runs as
// non-root with the RuntimeDefault seccomp profile, and every container has a
// securityContext with a read-only root filesystem, no privilege escalation
// and ALL capabilities dropped, plus liveness and readiness probes.
func Deployment(d *appsv1.Deployment) []string {
	var problems []string
	pod := d.Spec.Template.Spec
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		problems = append(problems, "pod must set runAsNonRoot: true")
	}
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		problems = append(problems, "pod must use the RuntimeDefault seccomp profile")
	}
	for _, c := range pod.Containers {
		sc := c.SecurityContext
		switch {
		case sc == nil:
			problems = append(problems, fmt.Sprintf("container %s has no securityContext", c.Name))
		case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
			problems = append(problems, fmt.Sprintf("container %s must have a read-only root filesystem", c.Name))
		case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
			problems = append(problems, fmt.Sprintf("container %s must set allowPrivilegeEscalation: false", c.Name))
		case sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL"):
			problems = append(problems, fmt.Sprintf("container %s must drop ALL capabilities", c.Name))
		}
		if c.LivenessProbe == nil || c.ReadinessProbe == nil {
			problems = append(problems, fmt.Sprintf("container %s needs liveness and readiness probes", c.Name))
		}
	}
	if len(pod.Containers) == 0 {
		problems = append(problems, "pod has no containers")
	}
	return problems
}
