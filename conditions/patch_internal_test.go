package conditions

import (
	"encoding/json"
	"testing"
)

// TestIsEmptyPatch: null and a member-less object (with any whitespace) are
// empty; an object with a member, however small, is not — the same answers
// as decoding the patch.
func TestIsEmptyPatch(t *testing.T) {
	for _, tc := range []struct {
		data string
		want bool
	}{
		{`{}`, true},
		{` { } `, true},
		{"{\n}", true},
		{`null`, true},
		{`{"status":{"phase":"Ready"}}`, false},
		{`{"status":null}`, false},
		{` {"a":1}`, false},
		{`{"metadata":{"resourceVersion":"7"}}`, false},
	} {
		if got := isEmptyPatch([]byte(tc.data)); got != tc.want {
			t.Errorf("isEmptyPatch(%q) = %v, want %v", tc.data, got, tc.want)
		}
		var m map[string]any
		if decoded := json.Unmarshal([]byte(tc.data), &m) == nil && len(m) == 0; decoded != tc.want {
			t.Errorf("decoding %q says empty = %v, the table says %v", tc.data, decoded, tc.want)
		}
	}
}
