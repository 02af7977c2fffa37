package ensure

import (
	"bytes"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// FuzzRecordOf feeds arbitrary AnnotationDeclared values — anyone who may
// edit a child may write one — to recordOf and to the merge that uses the
// record. recordOf must not panic, must return nil for a value that is not
// a field set (nothing removed) and a set that survives its own JSON round
// trip otherwise; the merge of a declaration with whatever that record makes
// ensure remove must still not modify live and must hold every declared
// field, and a record that names nothing live holds must change nothing the
// declaration does not.
func FuzzRecordOf(f *testing.F) {
	sh, err := (&schemas{}).shapeOf(appsv1.SchemeGroupVersion.WithKind("Deployment"))
	if err != nil {
		f.Fatal(err)
	}
	decl := map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "web", "image": "nginx",
				"ports": []any{map[string]any{"containerPort": int64(8080)}}}},
		}}},
	}
	full, err := fieldSet(decl, sh).ToJSON()
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		string(full),
		`{"f:metadata":{"f:labels":{"f:tier":{}}}}`,
		`{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"sidecar\"}":{".":{},"f:image":{}}}}}}}`,
		`{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{"f:ports":{"k:{\"containerPort\":9090,\"protocol\":\"TCP\"}":{".":{}}}}}}}}}`,
		`{"f:spec":{"f:replicas":{},"f:template":{"f:spec":{"f:tolerations":{}}}}}`,
		`{"v:\"x\"":{},"i:3":{}}`,
		`{"k:{}":{}}`,
		`{"f:":{"f:":{}}}`,
		`{".":{}}`,
		`{}`, `null`, `[]`, `"f:a"`, `{"f:a":1}`, `{"x:a":{}}`, `{"k:not json":{}}`, `{`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		live := runtimeCopy(decl)
		live["metadata"].(map[string]any)["labels"].(map[string]any)["user"] = "u"
		live["metadata"].(map[string]any)["annotations"] = map[string]any{AnnotationDeclared: s}
		ps := live["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
		ps["containers"] = append(ps["containers"].([]any), map[string]any{"name": "istio-proxy", "image": "istio"})
		before := runtimeCopy(live)

		rec := recordOf(live)
		if rec == nil {
			if strings.TrimSpace(s) != "" {
				var probe fieldpath.Set
				if probe.FromJSON(strings.NewReader(s)) == nil {
					t.Fatalf("recordOf(%q) = nil, but the value is a field set", s)
				}
			}
			return
		}
		raw, err := rec.ToJSON()
		if err != nil {
			t.Fatalf("record of %q does not render: %v", s, err)
		}
		back := &fieldpath.Set{}
		if err := back.FromJSON(bytes.NewReader(raw)); err != nil {
			t.Fatalf("record of %q rendered %s, which does not parse: %v", s, raw, err)
		}
		if !back.Equals(rec) {
			t.Fatalf("record of %q: round trip through %s changed it to %s", s, raw, back)
		}

		rm := rec.Difference(fieldSet(decl, sh))
		want, ok := merged(live, decl, rm, sh).(map[string]any)
		if !ok {
			t.Fatalf("record %q: merged is not an object", s)
		}
		if !equalTree(live, before) {
			t.Fatalf("record %q: merged modified live", s)
		}
		if !subset(decl, want, sh, keyedSubset) {
			t.Fatalf("record %q: the merged object lost a declared field:\n%v", s, want)
		}
		patch, _ := recordedPatch(live, want)
		if rm.Empty() && len(patch) != 0 {
			t.Fatalf("record %q removes nothing, yet the patch is %v", s, patch)
		}
	})
}
