package reconciler_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/opkit/opkit/ansible"
	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/outcome"
	"github.com/opkit/opkit/reconciler"
)

// TestPlaybookRunsAndFinalizerWaitsForItsPlaybook: Builder.Playbook runs the
// playbook on a live object (Running/Successful/Ready persisted), adds the
// watch's finalizer, and on delete keeps the finalizer while the finalizer
// playbook fails, removing it only after a run succeeds.
func TestPlaybookRunsAndFinalizerWaitsForItsPlaybook(t *testing.T) {
	if _, err := exec.LookPath("ansible-playbook"); err != nil {
		t.Fatalf("ansible-playbook: %v: run hack/ensure-ansible.sh (make ansible)", err)
	}
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	marker, block := filepath.Join(dir, "marker"), filepath.Join(dir, "block")
	pb := write("pb.yml", `- hosts: localhost
  gather_facts: false
  tasks:
    - name: record
      ansible.builtin.shell: "echo reconcile {{ ansible_operator_meta.name }} {{ value }} >> {{ marker }}"
`)
	fin := write("fin.yml", `- hosts: localhost
  gather_facts: false
  tasks:
    - name: blocked while the block file exists
      ansible.builtin.shell: "test ! -e {{ block }}"
    - name: record
      ansible.builtin.shell: "echo finalize {{ ansible_operator_meta.name }} >> {{ marker }}"
`)
	runner, err := ansible.New(ansible.Watch{
		GVK: gadgetGV.WithKind("Gadget"), Playbook: pb, Vars: map[string]any{"marker": marker, "block": block},
		Finalizer: &ansible.Finalizer{Name: "test.opkit.dev/playbook", Playbook: fin},
	})
	if err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	ctx := context.Background()
	c, err := client.New(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	r, err := reconciler.ForClient(c, "gadget-playbook", newGadget).Playbook(runner).Build()
	if err != nil {
		t.Fatal(err)
	}
	g := createGadget(t, &Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pb"}, Spec: GadgetSpec{Value: "v1"}})
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(g)}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if err := get(t, g)(); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(g.Finalizers, "test.opkit.dev/playbook") {
		t.Errorf("finalizers %v", g.Finalizers)
	}
	for _, typ := range []string{ansible.ConditionSuccessful, conditions.Ready} {
		if !conditions.IsTrue(g, typ) {
			t.Errorf("%s not True: %+v", typ, g.Status.Conditions)
		}
	}
	if b, _ := os.ReadFile(marker); string(b) != "reconcile pb v1\n" {
		t.Fatalf("marker %q", b)
	}

	write("block", "")
	if err := c.Delete(ctx, g); err != nil {
		t.Fatal(err)
	}
	_, err = r.Reconcile(ctx, req)
	if c := outcome.Classify(err); err == nil || c.Class != outcome.ClassTransient || !strings.Contains(err.Error(), `task "blocked while the block file exists" failed`) {
		t.Fatalf("Reconcile of the deleting object with a failing finalizer playbook: %v (class %v)", err, c.Class)
	}
	if err := get(t, g)(); err != nil || !slices.Contains(g.Finalizers, "test.opkit.dev/playbook") {
		t.Fatalf("the finalizer must stay while its playbook fails: %v %v", err, g.Finalizers)
	}
	if err := os.Remove(block); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if err := get(t, g)(); !apierrors.IsNotFound(err) {
		t.Fatalf("object still there after the finalizer playbook succeeded: %v %v", err, g.Finalizers)
	}
	if b, _ := os.ReadFile(marker); string(b) != "reconcile pb v1\nfinalize pb\n" {
		t.Fatalf("marker %q", b)
	}
}

func TestPlaybookNeedsARunner(t *testing.T) {
	_, err := reconciler.ForClient(env.Client, "gadget-nil-playbook", newGadget).Playbook(nil).Build()
	if err == nil || !strings.Contains(err.Error(), "Playbook needs a runner") {
		t.Fatalf("Build = %v", err)
	}
}
