package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestPlural(t *testing.T) {
	for kind, want := range map[string]string{
		"Guestbook": "guestbooks", "Cache": "caches", "Policy": "policies", "Gateway": "gateways",
		"Bus": "buses", "Box": "boxes", "Mesh": "meshes", "Fox": "foxes",
	} {
		if got := plural(kind); got != want {
			t.Errorf("plural(%q) = %q, want %q", kind, got, want)
		}
	}
}

func TestImportAlias(t *testing.T) {
	for _, c := range []struct{ group, version, want string }{
		{"webapp", "v1", "webappv1"},
		{"my-app", "v1alpha1", "myappv1alpha1"},
		{"apps", "v1", "appsv1api"}, // would shadow k8s.io/api/apps/v1 in the controller
		{"core", "v1", "corev1api"},
	} {
		if got := importAlias(c.group, c.version); got != c.want {
			t.Errorf("importAlias(%q, %q) = %q, want %q", c.group, c.version, got, c.want)
		}
	}
}

func TestValidation(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
	}{
		{"domain with upper case", validDomain("Example.com")},
		{"empty domain", validDomain("")},
		{"project name with a dot", validProjectName("my.operator")},
		{"repo with spaces", validRepo("example.com/my operator")},
		{"group with a dot", validGVK("web.app", "v1", "Guestbook")},
		{"group starting with a digit", validGVK("1app", "v1", "Guestbook")},
		{"version without v", validGVK("webapp", "1", "Guestbook")},
		{"lower-case kind", validGVK("webapp", "v1", "guestbook")},
	} {
		if c.err == nil {
			t.Errorf("%s: accepted", c.name)
		}
	}
	for _, err := range []error{
		validDomain("example.com"), validProjectName("guestbook-operator"), validRepo("github.com/acme/guestbook"),
		validGVK("webapp", "v1", "Guestbook"), validGVK("my-app", "v2beta3", "WebApp2"),
	} {
		if err != nil {
			t.Errorf("rejected: %v", err)
		}
	}
}

// The generated Makefile installs the controller-gen opkit itself pins.
func TestControllerToolsVersionMatchesTools(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "tools", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*sigs\.k8s\.io/controller-tools (v\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("tools/go.mod does not require sigs.k8s.io/controller-tools")
	}
	if string(m[1]) != controllerToolsVersion {
		t.Fatalf("controllerToolsVersion = %s, tools/go.mod pins %s: update cmd/opkit", controllerToolsVersion, m[1])
	}
}

// The commands refuse what would break a project, and write nothing when
// they refuse.
func TestCommandsRefuse(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	try := func(args ...string) error {
		var out bytes.Buffer
		return run(context.Background(), args, dir, &out, &out)
	}
	if err := try("create", "api", "--group", "webapp", "--version", "v1", "--kind", "Guestbook", "--make=false"); err == nil || !strings.Contains(err.Error(), "opkit init") {
		t.Errorf("create api without a project: %v, want an error naming opkit init", err)
	}
	if err := try("init", "--domain", "example.com"); err == nil || !strings.Contains(err.Error(), "--repo") {
		t.Errorf("init without --repo: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("a refused command wrote %d files", len(entries))
	}
	if err := try("init", "--domain", "example.com", "--repo", "example.com/guestbook", "--project-name", "guestbook", "--opkit-replace", root, "--fetch-deps=false"); err != nil {
		t.Fatal(err)
	}
	if err := try("init", "--domain", "example.com", "--repo", "example.com/guestbook", "--opkit-replace", root, "--fetch-deps=false"); err == nil {
		t.Error("a second init succeeded")
	}
	create := func(group, version, kind string, extra ...string) error {
		return try(append([]string{"create", "api", "--group", group, "--version", version, "--kind", kind, "--make=false"}, extra...)...)
	}
	if err := create("webapp", "v1", "Guestbook"); err != nil {
		t.Fatal(err)
	}
	if err := create("webapp", "v1", "Guestbook"); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Errorf("creating the same kind twice: %v", err)
	}
	if err := create("other", "v1", "Cache"); err == nil || !strings.Contains(err.Error(), "one group per project") {
		t.Errorf("a second group: %v", err)
	}
	if err := create("webapp", "v1", "Cache"); err != nil {
		t.Fatal(err)
	}
	// The same kind again with --force rewrites its files and adds no line twice.
	if err := create("webapp", "v1", "Guestbook", "--force"); err != nil {
		t.Fatal(err)
	}
	main, err := os.ReadFile(filepath.Join(dir, "cmd", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"(&controller.GuestbookReconciler{", "(&controller.CacheReconciler{", "webappv1.AddToScheme(scheme)", `"example.com/guestbook/internal/controller"`} {
		if n := strings.Count(string(main), line); n != 1 {
			t.Errorf("cmd/main.go holds %q %d times, want once", line, n)
		}
	}
	p, err := readProject(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Resources) != 2 || p.Resources[0].Kind != "Guestbook" || p.Resources[1].Plural != "caches" {
		t.Errorf("PROJECT resources = %+v", p.Resources)
	}
}

// init keeps a file that exists (a repository's README.md) unless --force.
func TestInitKeepsExistingFilesUnlessForced(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	readme := filepath.Join(dir, "README.md")
	if err := os.WriteFile(readme, []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"init", "--domain", "example.com", "--repo", "example.com/guestbook", "--opkit-replace", root, "--fetch-deps=false"}
	var out bytes.Buffer
	if err := run(context.Background(), args, dir, &out, &out); err == nil || !strings.Contains(err.Error(), "README.md exists already") {
		t.Fatalf("init over a README.md: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("a refused init wrote files: %d entries", len(entries))
	}
	if err := run(context.Background(), append(args, "--force"), dir, &out, &out); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(readme); string(b) == "mine\n" {
		t.Fatal("init --force kept README.md")
	}
}
