package conversion_test

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opkit/opkit/webhook/conversion"
)

type lost struct {
	Tier  string   `json:"tier,omitempty"`
	Zones []string `json:"zones,omitempty"`
}

func TestStashRestoreRoundTrip(t *testing.T) {
	spoke := metav1.ObjectMeta{Name: "g", Annotations: map[string]string{"keep": "me"}}
	if err := conversion.Stash(&spoke, lost{Tier: "gold", Zones: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	if got := spoke.Annotations[conversion.DataAnnotation]; got != `{"tier":"gold","zones":["a"]}` {
		t.Fatalf("annotation = %q", got)
	}
	hub := *spoke.DeepCopy()
	var out lost
	ok, err := conversion.Restore(&hub, &out)
	if err != nil || !ok || out.Tier != "gold" || len(out.Zones) != 1 {
		t.Fatalf("Restore = %v, %v, %+v", ok, err, out)
	}
	if len(hub.Annotations) != 1 || hub.Annotations["keep"] != "me" {
		t.Fatalf("hub annotations = %v", hub.Annotations)
	}
	if _, still := spoke.Annotations[conversion.DataAnnotation]; !still {
		t.Fatal("Restore changed the object it was not given")
	}
}

func TestStashOfZeroRemovesTheAnnotation(t *testing.T) {
	m := metav1.ObjectMeta{Annotations: map[string]string{conversion.DataAnnotation: `{"tier":"old"}`}}
	if err := conversion.Stash(&m, lost{}); err != nil {
		t.Fatal(err)
	}
	if m.Annotations != nil {
		t.Fatalf("annotations = %v, want none", m.Annotations)
	}
	var out lost
	if ok, err := conversion.Restore(&m, &out); ok || err != nil {
		t.Fatalf("Restore without annotation = %v, %v", ok, err)
	}
}

func TestRestoreOfMalformedAnnotationFails(t *testing.T) {
	m := metav1.ObjectMeta{Namespace: "ns", Name: "g", Annotations: map[string]string{conversion.DataAnnotation: `{"tier":`}}
	var out lost
	ok, err := conversion.Restore(&m, &out)
	if ok || err == nil {
		t.Fatalf("Restore = %v, %v", ok, err)
	}
	if _, kept := m.Annotations[conversion.DataAnnotation]; !kept {
		t.Fatal("malformed annotation removed")
	}
	if want := "ns/g"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not name %s", err, want)
	}
}

func ExampleStash() {
	// Converting hub → spoke: the spoke has no tier field, so stash it.
	var spoke metav1.ObjectMeta
	_ = conversion.Stash(&spoke, struct {
		Tier string `json:"tier"`
	}{Tier: "gold"})
	fmt.Println(spoke.Annotations)

	// Converting spoke → hub: restore from the hub's copy of the metadata.
	hub := *spoke.DeepCopy()
	var v struct {
		Tier string `json:"tier"`
	}
	ok, _ := conversion.Restore(&hub, &v)
	fmt.Println(ok, v.Tier, hub.Annotations == nil)
	// Output:
	// map[webhook.opkit.dev/conversion-data:{"tier":"gold"}]
	// true gold true
}
