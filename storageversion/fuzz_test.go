package storageversion_test

import (
	"encoding/json"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opkit/opkit/storageversion"
)

// FuzzReadProgress: the progress annotation is read back from a CRD anyone
// with patch rights can edit. Whatever it holds, ReadProgress does not panic,
// and what it returns survives a write and a read unchanged (a garbled
// record reads as no progress, which restarts the migration: safe, since a
// rewrite is idempotent). Explore with
// `go test -fuzz FuzzReadProgress ./storageversion/`.
func FuzzReadProgress(f *testing.F) {
	for _, s := range []string{
		`{"storageVersion":"v2","continue":"abc","migrated":100}`,
		`{"storageVersion":"v2","migrated":300,"done":true}`,
		`{"storageVersion":"v2","failed":"ns/bad: denied"}`,
		`{"migrated":-1}`, `{"migrated":1e40}`, `[]`, `null`, ``, `{`, `"v2"`,
		`{"storageVersion":"v2","continue":"abc","done":true,"migrated":"many"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{
			Annotations: map[string]string{storageversion.AnnotationProgress: v},
		}}
		p, ok := storageversion.ReadProgress(crd)
		if !ok {
			t.Fatal("an annotation that is present reads as absent")
		}
		var whole storageversion.Progress
		if json.Unmarshal([]byte(v), &whole) != nil && p != (storageversion.Progress{}) {
			t.Fatalf("a record that does not parse read as %+v, want no progress (never half of one)", p)
		}
		if p.Migrated < 0 {
			t.Fatalf("negative count %+v", p)
		}
		data, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		crd.Annotations[storageversion.AnnotationProgress] = string(data)
		again, _ := storageversion.ReadProgress(crd)
		if again != p {
			t.Fatalf("read %+v, wrote %s, read back %+v", p, data, again)
		}
	})
}
