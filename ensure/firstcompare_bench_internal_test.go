package ensure

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// BenchmarkFirstCompare: the steps of comparing a declaration with a cached
// Deployment that the memo of verified children does not know yet (every
// child after a restart): the record's shape key and the subset compare,
// and the decision whole: converting the cached object (toTree) or only the
// part the declaration names (toTreeWithin, as heldByCached does), on a
// fully cached Deployment and on one cached as reconciler.CacheDeclaredOnly
// keeps it.
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
	// The whole decision on a typed cached object: converting all of it
	// (as before heldByCached) or only what the declaration names.
	// As the webapp example caches a Deployment (reconciler.CacheDeclaredOnly):
	// the declared spec, all metadata and status.
	trimmed := d.DeepCopy()
	trimmed.ObjectMeta, trimmed.Status = *live.ObjectMeta.DeepCopy(), *live.Status.DeepCopy()
	b.Run("declaredOnly/toTree+subset", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			lt, _ := toTree(trimmed)
			subset(decl, lt, sh, keyedSubset)
		}
	})
	b.Run("declaredOnly/toTreeWithin+subset", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			part, _ := toTreeWithin(trimmed, decl, sh)
			subset(decl, part, sh, keyedSubset)
		}
	})
	b.Run("toTree+subset", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			lt, _ := toTree(live)
			subset(decl, lt, sh, keyedSubset)
		}
	})
	b.Run("toTreeWithin+subset", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			part, _ := toTreeWithin(live, decl, sh)
			subset(decl, part, sh, keyedSubset)
		}
	})
}
