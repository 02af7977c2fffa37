package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
)

const (
	// opkitModule is the module the generated project requires.
	opkitModule = "github.com/opkit/opkit"
	// goVersion is the go directive of the generated go.mod: opkit's own.
	goVersion = "1.26.0"
	// controllerToolsVersion is the controller-gen the generated Makefile
	// installs: the one opkit pins in tools/go.mod (a test keeps them equal).
	controllerToolsVersion = "v0.23.0"
	// kustomizeVersion is the kustomize the generated Makefile installs for
	// install, deploy and build-installer.
	kustomizeVersion = "v5.8.1"
	// replacePlaceholder is the version required alongside a replace directive.
	replacePlaceholder = "v0.0.0-00010101000000-000000000000"
)

var initFiles = []file{
	{"init/go.mod.tmpl", "go.mod"},
	{"init/Makefile.tmpl", "Makefile"},
	{"init/Dockerfile.tmpl", "Dockerfile"},
	{"init/dockerignore.tmpl", ".dockerignore"},
	{"init/gitignore.tmpl", ".gitignore"},
	{"init/README.md.tmpl", "README.md"},
	{"init/main.go.tmpl", "cmd/main.go"},
	{"init/config/default/kustomization.yaml.tmpl", "config/default/kustomization.yaml"},
	{"init/config/default/metrics_service.yaml.tmpl", "config/default/metrics_service.yaml"},
	{"init/config/default/manager_metrics_patch.yaml.tmpl", "config/default/manager_metrics_patch.yaml"},
	{"init/config/manager/kustomization.yaml.tmpl", "config/manager/kustomization.yaml"},
	{"init/config/manager/manager.yaml.tmpl", "config/manager/manager.yaml"},
	{"init/config/crd/kustomization.yaml.tmpl", "config/crd/kustomization.yaml"},
	{"init/config/rbac/kustomization.yaml.tmpl", "config/rbac/kustomization.yaml"},
	{"init/config/rbac/role.yaml.tmpl", "config/rbac/role.yaml"},
	{"init/config/rbac/role_binding.yaml.tmpl", "config/rbac/role_binding.yaml"},
	{"init/config/rbac/service_account.yaml.tmpl", "config/rbac/service_account.yaml"},
	{"init/config/rbac/leader_election_role.yaml.tmpl", "config/rbac/leader_election_role.yaml"},
	{"init/config/rbac/leader_election_role_binding.yaml.tmpl", "config/rbac/leader_election_role_binding.yaml"},
	{"init/config/rbac/metrics_auth_role.yaml.tmpl", "config/rbac/metrics_auth_role.yaml"},
	{"init/config/rbac/metrics_auth_role_binding.yaml.tmpl", "config/rbac/metrics_auth_role_binding.yaml"},
	{"init/config/rbac/metrics_reader_role.yaml.tmpl", "config/rbac/metrics_reader_role.yaml"},
	{"init/config/prometheus/kustomization.yaml.tmpl", "config/prometheus/kustomization.yaml"},
	{"init/config/prometheus/monitor.yaml.tmpl", "config/prometheus/monitor.yaml"},
	{"init/config/samples/kustomization.yaml.tmpl", "config/samples/kustomization.yaml"},
}

func runInit(ctx context.Context, args []string, dir string, stdout, stderr io.Writer) error {
	fl := flag.NewFlagSet("opkit init", flag.ContinueOnError)
	domain := fl.String("domain", "my.domain", "domain of the project's API groups (a group \"webapp\" becomes webapp.<domain>)")
	repo := fl.String("repo", "", "Go module path of the project (required), e.g. example.com/guestbook")
	name := fl.String("project-name", "", "name of the project, prefixing its objects in the cluster (default: the directory's name)")
	replace := fl.String("opkit-replace", os.Getenv("OPKIT_REPLACE"), "local directory of github.com/opkit/opkit to use through a replace directive (default $OPKIT_REPLACE)")
	version := fl.String("opkit-version", "", "version of github.com/opkit/opkit to require (default: the version this command was built from)")
	fetch := fl.Bool("fetch-deps", true, "run \"go mod tidy\" afterwards, which downloads the dependencies and writes go.sum")
	force := fl.Bool("force", false, "overwrite files the project would have that exist already (README.md, .gitignore, …)")
	if err := parseFlags(fl, args, stderr, "Usage: opkit init --domain DOMAIN --repo MODULE [flags]\n\nWrites a new operator project, in kubebuilder's layout, into the current directory.\n\nFlags:"); err != nil {
		return err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if *name == "" {
		*name = strings.ToLower(filepath.Base(abs))
	}
	if *repo == "" {
		return errors.New("init: --repo is required (the Go module path, e.g. example.com/guestbook)")
	}
	for _, err := range []error{validDomain(*domain), validRepo(*repo), validProjectName(*name)} {
		if err != nil {
			return fmt.Errorf("init: %w", err)
		}
	}
	for _, f := range []string{projectFile, "go.mod"} {
		if _, err := os.Stat(filepath.Join(abs, f)); err == nil {
			return fmt.Errorf("init: %s exists already in %s: the directory holds a project", f, abs)
		}
	}
	d := data{
		Repo: *repo, Domain: *domain, ProjectName: *name, GoVersion: goVersion,
		ControllerToolsVersion: controllerToolsVersion, KustomizeVersion: kustomizeVersion,
	}
	switch {
	case *replace != "":
		r, err := filepath.Abs(*replace)
		if err != nil {
			return err
		}
		if _, err := os.Stat(filepath.Join(r, "go.mod")); err != nil {
			return fmt.Errorf("init: --opkit-replace %s: no go.mod there (want the root of a github.com/opkit/opkit checkout)", r)
		}
		d.OpkitReplace, d.OpkitVersion = filepath.ToSlash(r), replacePlaceholder
	case *version != "":
		d.OpkitVersion = *version
	default:
		d.OpkitVersion = ownVersion()
		if d.OpkitVersion == "" {
			return errors.New("init: this opkit command was built from a checkout, not a released module, so it does not know which opkit version to require: pass --opkit-version, or --opkit-replace with the checkout's directory")
		}
	}
	if err := renderFiles(abs, d, initFiles, *force); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	p := &project{Domain: *domain, Layout: []string{layout}, ProjectName: *name, Repo: *repo, Version: "3"}
	if err := p.write(abs); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	if *fetch {
		if err := command(ctx, abs, stdout, stderr, "go", "mod", "tidy"); err != nil {
			return fmt.Errorf("init: %w", err)
		}
	}
	fmt.Fprintf(stdout, "Next: opkit create api --group <group> --version <version> --kind <Kind>\n")
	return nil
}

// ownVersion is the version of github.com/opkit/opkit this binary was built
// from, or "" when it was built from a checkout ("(devel)").
func ownVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	mods := append([]*debug.Module{&bi.Main}, bi.Deps...)
	for _, m := range mods {
		if m.Path == opkitModule && m.Replace == nil && strings.HasPrefix(m.Version, "v") {
			return m.Version
		}
	}
	return ""
}

// command runs name with args in dir, its output to stdout and stderr.
func command(ctx context.Context, dir string, stdout, stderr io.Writer, name string, args ...string) error {
	fmt.Fprintf(stdout, "$ %s %s\n", name, strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, stdout, stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return nil
}
