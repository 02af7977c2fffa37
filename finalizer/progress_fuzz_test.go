package finalizer

import (
	"slices"
	"strings"
	"testing"
)

// FuzzParseProgress feeds parseProgress, which reads ProgressAnnotation back
// from the object being deleted (anyone who may edit it can rewrite it),
// arbitrary values. It must not panic; it must lose nothing (joining what it
// read with "," gives the value back; "" reads as no step); and merging
// steps done since, as recordProgress does, must keep every step read and
// add each new valid step name once, so the value written back reads as the
// steps done in order.
func FuzzParseProgress(f *testing.F) {
	for _, s := range []string{"", "a", "a,b", "drain,backup,release", ",", "a,,b", " a , b ", "a,a", "\x00,é"} {
		f.Add(s, "backup", "release")
	}
	f.Fuzz(func(t *testing.T, v, s1, s2 string) {
		got := parseProgress(v)
		if v == "" {
			if got != nil {
				t.Fatalf("parseProgress(\"\") = %q, want nil", got)
			}
		} else if joined := strings.Join(got, ","); joined != v {
			t.Fatalf("parseProgress(%q) = %q, which joins as %q", v, got, joined)
		}

		var done []string
		for _, s := range []string{s1, s2} {
			if s != "" && !strings.ContainsAny(s, ", \t\n") && !slices.Contains(done, s) {
				done = append(done, s) // a name New accepts for a step
			}
		}
		merged := union(got, done)
		back := parseProgress(strings.Join(merged, ","))
		if v == "" && len(done) == 0 {
			if back != nil {
				t.Fatalf("nothing recorded and nothing done, yet %q read back", back)
			}
			return
		}
		if !slices.Equal(back, merged) || !slices.Equal(back[:len(got)], got) {
			t.Fatalf("recorded %q, done %q: wrote %q, read back %q", v, done, merged, back)
		}
		for _, s := range done {
			if n := countOf(back, s); n != 1 && !slices.Contains(got, s) {
				t.Fatalf("recorded %q, done %q: step %q read back %d times", v, done, s, n)
			}
		}
	})
}

func countOf(xs []string, s string) (n int) {
	for _, x := range xs {
		if x == s {
			n++
		}
	}
	return n
}
