package main

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"go/format"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/template"
)

//go:embed templates
var templates embed.FS

// data is what the templates see.
type data struct {
	Repo        string // Go module path
	Domain      string // API domain (example.com)
	ProjectName string // DNS label naming the operator's objects

	GoVersion    string // go directive of the generated go.mod
	OpkitVersion string // required version of github.com/opkit/opkit
	OpkitReplace string // absolute directory replacing it, or ""

	ControllerToolsVersion string
	KustomizeVersion       string

	// create api only.
	Group          string // API group without the domain (webapp)
	QualifiedGroup string // full API group (webapp.example.com)
	Version        string // API version (v1)
	Kind           string // Guestbook
	KindLower      string // guestbook
	Plural         string // guestbooks
	Alias          string // import alias of the API package (webappv1)
}

// file is one file a command writes: tmpl under templates/, path (itself a
// template) relative to the project.
type file struct{ tmpl, path string }

func execute(name, text string, d data) ([]byte, error) {
	t, err := template.New(name).Parse(text)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, d); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// renderFiles renders files into dir. Unless force is set it writes nothing
// when any of them exists already. Go files are gofmt'd.
func renderFiles(dir string, d data, files []file, force bool) error {
	type rendered struct {
		path    string
		content []byte
	}
	var out []rendered
	for _, f := range files {
		p, err := execute(f.tmpl+" path", f.path, d)
		if err != nil {
			return err
		}
		text, err := templates.ReadFile("templates/" + f.tmpl)
		if err != nil {
			return err
		}
		content, err := execute(f.tmpl, string(text), d)
		if err != nil {
			return err
		}
		path := string(p)
		if strings.HasSuffix(path, ".go") {
			if content, err = format.Source(content); err != nil {
				return fmt.Errorf("template %s: %w", f.tmpl, err)
			}
		}
		full := filepath.Join(dir, filepath.FromSlash(path))
		if _, err := os.Stat(full); err == nil && !force {
			return fmt.Errorf("%s exists already (--force overwrites it)", path)
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		out = append(out, rendered{full, content})
	}
	for _, r := range out {
		if err := os.MkdirAll(filepath.Dir(r.path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(r.path, r.content, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// insertAt adds block before the line of path that holds marker (a
// kubebuilder scaffold marker), indented like the marker, unless the file
// has a line equal to block's first line already, so running a command
// twice adds nothing twice. A Go file is gofmt'd afterwards.
func insertAt(path, marker, block string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	lines := strings.Split(string(b), "\n")
	blockLines := strings.Split(strings.TrimRight(block, "\n"), "\n")
	at := -1
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if t == strings.TrimSpace(blockLines[0]) {
			return nil
		}
		if t == marker && at < 0 {
			at = i
		}
	}
	if at < 0 {
		return fmt.Errorf("%s: marker %q not found; was it removed? Add the following yourself:\n%s", path, marker, block)
	}
	indent := lines[at][:len(lines[at])-len(strings.TrimLeft(lines[at], " \t"))]
	add := make([]string, len(blockLines))
	for i, l := range blockLines {
		add[i] = indent + l
	}
	lines = append(lines[:at], append(add, lines[at:]...)...)
	out := []byte(strings.Join(lines, "\n"))
	if strings.HasSuffix(path, ".go") {
		if out, err = format.Source(out); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return os.WriteFile(path, out, 0o644)
}
