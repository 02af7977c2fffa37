package helm

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
)

// Load loads a chart from the local file system: a chart directory or a
// packaged chart (.tgz). Nothing is fetched over the network; dependencies
// must be vendored in the chart's charts/ directory.
func Load(name string) (*chart.Chart, error) {
	ch, err := loader.Load(name)
	if err != nil {
		return nil, fmt.Errorf("helm: load chart %s: %w", name, err)
	}
	return ch, nil
}

// LoadFS loads a chart from fsys (an embed.FS, os.DirFS, fstest.MapFS…):
// name is a chart directory (holding Chart.yaml) or a packaged chart (a file
// ending in .tgz or .tar.gz) in fsys. Like [Load], it never reads the network.
func LoadFS(fsys fs.FS, name string) (*chart.Chart, error) {
	name = path.Clean(name)
	if strings.HasSuffix(name, ".tgz") || strings.HasSuffix(name, ".tar.gz") {
		f, err := fsys.Open(name)
		if err != nil {
			return nil, fmt.Errorf("helm: load chart %s: %w", name, err)
		}
		defer func() { _ = f.Close() }()
		ch, err := loader.LoadArchive(f)
		if err != nil {
			return nil, fmt.Errorf("helm: load chart %s: %w", name, err)
		}
		return ch, nil
	}
	var files []*archive.BufferedFile
	err := fs.WalkDir(fsys, name, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p, name), "/")
		if name == "." {
			rel = p
		}
		files = append(files, &archive.BufferedFile{Name: rel, Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("helm: load chart %s: %w", name, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("helm: load chart %s: %w", name, errors.New("no files"))
	}
	ch, err := loader.LoadFiles(files)
	if err != nil {
		return nil, fmt.Errorf("helm: load chart %s: %w", name, err)
	}
	return ch, nil
}
