package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opkit/opkit/testenv/assets"
)

// TestScaffoldedProjectPassesItsTests generates a project with two kinds
// (in two API versions) into a temporary directory, builds it, runs its own
// "make test" (controller-gen, go fmt, go vet, then its tests on
// opkit's harness: a CR becomes Ready with its Deployment, and a steady-state
// reconcile writes nothing), checks that make test changed none of the
// generated files, and renders its kustomizations with the harness's kubectl.
//
// Dependencies come through the Go module proxy (or the module cache), the
// control-plane binaries from KUBEBUILDER_ASSETS or opkit's cache, as for
// opkit's own tests.
func TestScaffoldedProjectPassesItsTests(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	opkit(t, dir, "init", "--domain", "example.com", "--repo", "example.com/guestbook", "--project-name", "guestbook", "--opkit-replace", root)
	opkit(t, dir, "create", "api", "--group", "webapp", "--version", "v1", "--kind", "Guestbook")
	opkit(t, dir, "create", "api", "--group", "webapp", "--version", "v1alpha1", "--kind", "Cache")

	for _, f := range []string{
		"PROJECT", "go.sum", "cmd/main.go", "Dockerfile",
		"api/v1/zz_generated.deepcopy.go", "api/v1alpha1/zz_generated.deepcopy.go",
		"config/crd/bases/webapp.example.com_guestbooks.yaml", "config/crd/bases/webapp.example.com_caches.yaml",
		"internal/controller/guestbook_controller_test.go", "internal/controller/cache_controller_test.go",
	} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("the scaffold did not write %s: %v", f, err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	shell(t, dir, "go", "build", "./...")

	before := snapshot(t, dir)
	out := shell(t, dir, "make", "test")
	// make test vets, and runs the tests rather than replaying them from the
	// test cache (the temporary directory is new): the control plane started.
	if !strings.Contains(out, "go vet ./...") || !strings.Contains(out, "ok  \texample.com/guestbook/internal/controller") || strings.Contains(out, "(cached)") {
		t.Errorf("make test did not vet and run the controller tests:\n%s", out)
	}
	after := snapshot(t, dir)
	for f, sum := range after {
		if before[f] != sum {
			t.Errorf("make test (generate, manifests, fmt) changed %s: the scaffold wrote it stale", f)
		}
	}
	for f := range before {
		if _, ok := after[f]; !ok {
			t.Errorf("make test removed %s", f)
		}
	}

	// The kustomize tree renders: the whole operator, and the samples.
	bin, err := assets.Find(assets.Options{})
	if err != nil {
		t.Fatal(err)
	}
	kubectl := filepath.Join(bin, "kubectl")
	rendered := shell(t, dir, kubectl, "kustomize", "config/default")
	for _, want := range []string{
		"name: guestbooks.webapp.example.com", "name: caches.webapp.example.com",
		"name: guestbook-controller-manager", "namespace: guestbook-system", "name: guestbook-manager-role",
		"- --metrics-bind-address=:8443", "name: guestbook-cache-editor-role",
	} {
		if !strings.Contains(rendered, want) {
			t.Errorf("kubectl kustomize config/default lacks %q", want)
		}
	}
	samples := shell(t, dir, kubectl, "kustomize", "config/samples")
	for _, want := range []string{"kind: Guestbook", "kind: Cache"} {
		if !strings.Contains(samples, want) {
			t.Errorf("kubectl kustomize config/samples lacks %q", want)
		}
	}
}

// opkit runs the command in-process in dir, failing the test on error.
func opkit(t *testing.T, dir string, args ...string) {
	t.Helper()
	start := time.Now()
	var out bytes.Buffer
	if err := run(context.Background(), args, dir, &out, &out); err != nil {
		t.Fatalf("opkit %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	t.Logf("opkit %s: %s", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
}

// shell runs name in dir with the test's environment (KUBEBUILDER_ASSETS,
// GOFLAGS, the Go caches; not make's own variables) and returns its combined
// output, failing the test on error. When this test runs with -race (as
// opkit's make test runs it), GOFLAGS gains -race: the generated project is
// built, vetted and tested under the race detector, and its dependencies
// (the same versions as opkit's) come from the race build opkit's own vet
// and tests left in the build cache instead of being compiled a second time
// without it.
func shell(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	start := time.Now()
	cmd := exec.CommandContext(t.Context(), name, args...)
	cmd.Dir = dir
	// Under opkit's own make, MAKEFLAGS would hand its command-line variables
	// and jobserver to the project's make.
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "MAKEFLAGS" && k != "MFLAGS" && k != "MAKELEVEL" && k != "MAKEOVERRIDES" && k != "GOFLAGS" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "GOFLAGS="+goflags(os.Getenv("GOFLAGS"), raceEnabled))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	t.Logf("%s %s: %s", filepath.Base(name), strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	return string(out)
}

// snapshot hashes every file of the project but build and test outputs.
func snapshot(t *testing.T, dir string) map[string][sha256.Size]byte {
	t.Helper()
	sums := map[string][sha256.Size]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if d.IsDir() {
			if rel == "bin" {
				return filepath.SkipDir
			}
			return nil
		}
		if rel == "cover.out" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		sums[rel] = sha256.Sum256(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sums
}

// goflags returns GOFLAGS for the generated project's go commands: flags
// as given, with -race added when race is true and flags lack it.
func goflags(flags string, race bool) string {
	if !race || slices.Contains(strings.Fields(flags), "-race") {
		return flags
	}
	return strings.TrimSpace(flags + " -race")
}

func TestGoflagsAddsRaceOnlyWhenMissing(t *testing.T) {
	for _, c := range []struct {
		flags string
		race  bool
		want  string
	}{
		{"", false, ""},
		{"-mod=mod", false, "-mod=mod"},
		{"", true, "-race"},
		{"-mod=mod", true, "-mod=mod -race"},
		{"-race -mod=mod", true, "-race -mod=mod"},
		{"-racex", true, "-racex -race"},
	} {
		if got := goflags(c.flags, c.race); got != c.want {
			t.Errorf("goflags(%q, %t) = %q, want %q", c.flags, c.race, got, c.want)
		}
	}
}
