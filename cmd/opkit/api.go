package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Files create api writes once per API version (the package) and per kind.
var (
	apiVersionFiles = []file{
		{"api/groupversion_info.go.tmpl", "api/{{.Version}}/groupversion_info.go"},
	}
	apiSuiteFiles = []file{
		{"api/suite_test.go.tmpl", "internal/controller/suite_test.go"},
	}
	apiKindFiles = []file{
		{"api/types.go.tmpl", "api/{{.Version}}/{{.KindLower}}_types.go"},
		{"api/controller.go.tmpl", "internal/controller/{{.KindLower}}_controller.go"},
		{"api/controller_test.go.tmpl", "internal/controller/{{.KindLower}}_controller_test.go"},
		{"api/sample.yaml.tmpl", "config/samples/{{.Group}}_{{.Version}}_{{.KindLower}}.yaml"},
		{"api/editor_role.yaml.tmpl", "config/rbac/{{.KindLower}}_editor_role.yaml"},
		{"api/viewer_role.yaml.tmpl", "config/rbac/{{.KindLower}}_viewer_role.yaml"},
	}
)

// Scaffold markers (kubebuilder's, where kubebuilder has one) where create
// api adds lines to files init wrote.
const (
	markerImports   = "// +kubebuilder:scaffold:imports"
	markerScheme    = "// +kubebuilder:scaffold:scheme"
	markerBuilder   = "// +kubebuilder:scaffold:builder"
	markerCRD       = "# +kubebuilder:scaffold:crdkustomizeresource"
	markerSamples   = "# +kubebuilder:scaffold:manifestskustomizesamples"
	markerRBACRoles = "# +opkit:scaffold:rbacroles"
)

func runCreateAPI(ctx context.Context, args []string, dir string, stdout, stderr io.Writer) error {
	fl := flag.NewFlagSet("opkit create api", flag.ContinueOnError)
	group := fl.String("group", "", "API group without the domain (required), e.g. webapp")
	version := fl.String("version", "", "API version (required), e.g. v1 or v1alpha1")
	kind := fl.String("kind", "", "kind of the custom resource, PascalCase (required), e.g. Guestbook")
	pl := fl.String("plural", "", "resource name in URLs and the CRD's name (default: the kind's English plural, lower case)")
	mk := fl.Bool("make", true, "run \"go mod tidy\" and \"make generate manifests\" afterwards (deepcopy functions, CRD, RBAC)")
	force := fl.Bool("force", false, "overwrite the kind's files when they exist")
	if err := parseFlags(fl, args, stderr, "Usage: opkit create api --group GROUP --version VERSION --kind KIND [flags]\n\nAdds a custom resource, its controller (composed with opkit's reconciler builder), a sample and tests to the project in the current directory.\n\nFlags:"); err != nil {
		return err
	}
	if *group == "" || *version == "" || *kind == "" {
		return errors.New("create api: --group, --version and --kind are required")
	}
	if err := validGVK(*group, *version, *kind); err != nil {
		return fmt.Errorf("create api: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	p, err := readProject(abs)
	if err != nil {
		return fmt.Errorf("create api: %w", err)
	}
	if *pl == "" {
		*pl = plural(*kind)
	}
	if !dns1123Label.MatchString(*pl) {
		return fmt.Errorf("create api: plural %q: want lower-case letters, digits and '-'", *pl)
	}
	exists := false
	for _, r := range p.Resources {
		if r.Group != *group {
			return fmt.Errorf("create api: the project's API group is %s: one group per project (kubebuilder's single-group layout: api/<version>)", r.Group)
		}
		if r.Version == *version && r.Kind == *kind {
			exists = true
		}
	}
	if exists && !*force {
		return fmt.Errorf("create api: %s/%s %s exists already in %s (--force rewrites its files)", *group, *version, *kind, projectFile)
	}
	d := data{
		Repo: p.Repo, Domain: p.Domain, ProjectName: p.ProjectName,
		Group: *group, QualifiedGroup: *group + "." + p.Domain, Version: *version,
		Kind: *kind, KindLower: strings.ToLower(*kind), Plural: *pl, Alias: importAlias(*group, *version),
	}

	files := apiKindFiles
	if _, err := os.Stat(filepath.Join(abs, "api", *version, "groupversion_info.go")); errors.Is(err, os.ErrNotExist) {
		files = append(files, apiVersionFiles...)
	}
	if _, err := os.Stat(filepath.Join(abs, "internal", "controller", "suite_test.go")); errors.Is(err, os.ErrNotExist) {
		files = append(files, apiSuiteFiles...)
	}
	if err := renderFiles(abs, d, files, *force); err != nil {
		return fmt.Errorf("create api: %w", err)
	}
	apiImport := fmt.Sprintf("%s %q", d.Alias, p.Repo+"/api/"+*version)
	edits := []struct{ path, marker, block string }{
		{"cmd/main.go", markerImports, apiImport},
		{"cmd/main.go", markerImports, fmt.Sprintf("%q", p.Repo+"/internal/controller")},
		{"cmd/main.go", markerScheme, fmt.Sprintf("utilruntime.Must(%s.AddToScheme(scheme))", d.Alias)},
		{"cmd/main.go", markerBuilder, fmt.Sprintf("if err := (&controller.%sReconciler{Observability: obs}).SetupWithManager(mgr); err != nil {\n\treturn err\n}", *kind)},
		{"internal/controller/suite_test.go", markerImports, apiImport},
		{"internal/controller/suite_test.go", markerScheme, fmt.Sprintf("utilruntime.Must(%s.AddToScheme(s))", d.Alias)},
		{"config/crd/kustomization.yaml", markerCRD, fmt.Sprintf("- bases/%s_%s.yaml", d.QualifiedGroup, *pl)},
		{"config/samples/kustomization.yaml", markerSamples, fmt.Sprintf("- %s_%s_%s.yaml", *group, *version, d.KindLower)},
		{"config/rbac/kustomization.yaml", markerRBACRoles, fmt.Sprintf("- %s_editor_role.yaml\n- %s_viewer_role.yaml", d.KindLower, d.KindLower)},
	}
	for _, e := range edits {
		if err := insertAt(filepath.Join(abs, filepath.FromSlash(e.path)), e.marker, e.block); err != nil {
			return fmt.Errorf("create api: %w", err)
		}
	}
	if !exists {
		p.Resources = append(p.Resources, resource{
			API:        &resourceAPI{CRDVersion: "v1", Namespaced: true},
			Controller: true, Domain: p.Domain, Group: *group, Kind: *kind,
			Path: p.Repo + "/api/" + *version, Plural: *pl, Version: *version,
		})
		if err := p.write(abs); err != nil {
			return fmt.Errorf("create api: %w", err)
		}
	}
	if *mk {
		if err := command(ctx, abs, stdout, stderr, "go", "mod", "tidy"); err != nil {
			return fmt.Errorf("create api: %w", err)
		}
		if err := command(ctx, abs, stdout, stderr, "make", "generate", "manifests"); err != nil {
			return fmt.Errorf("create api: %w", err)
		}
	}
	fmt.Fprintf(stdout, "Created %s/%s %s. Next: edit api/%s/%s_types.go and internal/controller/%s_controller.go, then: make test\n",
		d.QualifiedGroup, *version, *kind, *version, d.KindLower, d.KindLower)
	return nil
}
