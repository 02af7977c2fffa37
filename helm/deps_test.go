package helm_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLibraryConsumersDoNotGetHelm: the library module (the parent
// directory) neither requires Helm nor builds it into a program that
// imports conditions (or anything else of the library); only this module
// does.
func TestLibraryConsumersDoNotGetHelm(t *testing.T) {
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = ".."
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if deps := run("list", "-deps", "github.com/opkit/opkit/conditions"); strings.Contains(deps, "helm.sh/") {
		t.Fatalf("conditions depends on Helm:\n%s", deps)
	}
	if graph := run("mod", "graph"); strings.Contains(graph, "helm.sh/helm") {
		t.Fatal("the library's module graph holds helm.sh/helm")
	}
	if deps := run("list", "-deps", "./..."); strings.Contains(deps, "helm.sh/") {
		t.Fatal("a package of the library module depends on Helm")
	}
}
