package ensure

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// BenchmarkFirstCompare: the steps of comparing a declaration with a cached
// Deployment that the memo of verified children does not know yet (every
// child after a restart): the record's shape key and the subset compare.
func BenchmarkFirstCompare(b *testing.B) {
	sh, err := (&schemas{}).shapeOf(appsv1.SchemeGroupVersion.WithKind("Deployment"))
	if err != nil {
		b.Fatal(err)
	}
	live := cachedDeployment()
	d := live.DeepCopy()
	d.Status = appsv1.DeploymentStatus{}
	d.ResourceVersion, d.UID, d.Generation = "", "", 0
	ps := &d.Spec.Template.Spec
	ps.RestartPolicy, ps.DNSPolicy, ps.SchedulerName, ps.SecurityContext = "", "", "", nil
	ps.Containers[0].TerminationMessagePath, ps.Containers[0].TerminationMessagePolicy, ps.Containers[0].ImagePullPolicy = "", "", ""
	decl, err := declared(d)
	if err != nil {
		b.Fatal(err)
	}
	lt, err := toTree(live)
	if err != nil {
		b.Fatal(err)
	}
	if !subset(decl, lt, sh, keyedSubset) {
		b.Fatal("the declaration is not a subset of the cached Deployment")
	}
	b.Run("recordKey", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var sb strings.Builder
			writeShape(&sb, decl, sh, string(live.UID), atRoot)
		}
	})
	b.Run("subset", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			subset(decl, lt, sh, keyedSubset)
		}
	})
}
