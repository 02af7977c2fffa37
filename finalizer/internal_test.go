package finalizer

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTruncateKeepsValidUTF8WithinLimit(t *testing.T) {
	s := strings.Repeat("é", 600) // 1200 bytes
	got := truncate(s, maxEventNote)
	if len(got) > maxEventNote || !utf8.ValidString(got) || !strings.HasSuffix(got, "...") {
		t.Fatalf("len %d, valid %v", len(got), utf8.ValidString(got))
	}
	if truncate("short", 10) != "short" {
		t.Fatal("short string changed")
	}
}

func TestPatchEncoding(t *testing.T) {
	ops := []jsonOp{
		{Op: "test", Path: "/metadata/annotations", Value: nil},
		{Op: "remove", Path: "/metadata/annotations/" + escapePointer(ProgressAnnotation)},
	}
	b, err := json.Marshal(ops)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"op":"test","path":"/metadata/annotations","value":null},{"op":"remove","path":"/metadata/annotations/finalizer.opkit.dev~1progress"}]`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
}

func TestUnionKeepsOrder(t *testing.T) {
	got := strings.Join(union([]string{"a", "c"}, []string{"b", "a", "d"}), ",")
	if got != "a,c,b,d" {
		t.Fatal(got)
	}
	if parseProgress("") != nil {
		t.Fatal("empty progress must parse to nothing")
	}
}
