// Package bundle holds the charts the chart example operator releases: two
// versions of a guestbook chart, embedded in the binary (no repository, no
// network). 1.1.0 drops the legacy ConfigMap and adds a pre-upgrade
// migration Job hook.
package bundle

import (
	"embed"
	"fmt"

	chart "helm.sh/helm/v4/pkg/chart/v2"

	"github.com/opkit/opkit/helm"
)

//go:embed all:guestbook-1.0.0 all:guestbook-1.1.0
var files embed.FS

// Versions are the bundled chart versions, oldest first.
var Versions = []string{"1.0.0", "1.1.0"}

// Load loads every bundled chart, by version.
func Load() (map[string]*chart.Chart, error) {
	out := map[string]*chart.Chart{}
	for _, v := range Versions {
		ch, err := helm.LoadFS(files, "guestbook-"+v)
		if err != nil {
			return nil, err
		}
		if ch.Metadata.Version != v {
			return nil, fmt.Errorf("bundle: guestbook-%s holds chart version %s", v, ch.Metadata.Version)
		}
		out[v] = ch
	}
	return out, nil
}
