package helm

import (
	"strconv"
	"strings"
	"testing"

	rspb "helm.sh/helm/v4/pkg/release/v1"
)

// FuzzRollbackRevision: AnnotationRollbackTo is set by users on the custom
// resource. A value is accepted only as a revision ≥ 1 that reads back the
// same, and anything else is an error naming the annotation — never a
// panic, never a revision below 1.
func FuzzRollbackRevision(f *testing.F) {
	for _, s := range []string{"1", " 3 ", "0", "-2", "+4", "007", "9223372036854775808", "1e3", "", "two"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		n, err := rollbackRevision(v)
		if err != nil {
			if !strings.Contains(err.Error(), AnnotationRollbackTo) {
				t.Fatalf("error %q does not name %s", err, AnnotationRollbackTo)
			}
			return
		}
		if n < 1 {
			t.Fatalf("rollbackRevision(%q) = %d, below 1", v, n)
		}
		if again, err := rollbackRevision(strconv.Itoa(n)); err != nil || again != n {
			t.Fatalf("rollbackRevision(%q) = %d; its decimal form reads %d, %v", v, n, again, err)
		}
	})
}

// FuzzFailedObjectOf: a failed release record's description is read back
// from the release storage (a Secret anyone with access can write). The
// object named is a part of the description after " failed: ", holding no
// ": ", and nothing without that marker names one.
func FuzzFailedObjectOf(f *testing.F) {
	for _, s := range []string{
		"Upgrade \"x\" failed: Deployment/web: admission webhook denied",
		"Install complete", "failed: ", " failed: : ", "a failed: b failed: c: d",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, desc string) {
		rec := &rspb.Release{Info: &rspb.Info{Description: desc}}
		what := failedObjectOf(rec)
		if !strings.Contains(desc, " failed: ") {
			if what != "" {
				t.Fatalf("failedObjectOf(%q) = %q without a failure", desc, what)
			}
			return
		}
		if strings.Contains(what, ": ") || !strings.Contains(desc, what) {
			t.Fatalf("failedObjectOf(%q) = %q", desc, what)
		}
	})
}
