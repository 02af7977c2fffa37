package helm_test

import (
	"fmt"
	"os"
	"testing/fstest"

	"github.com/opkit/opkit/helm"
)

// ExampleLoadFS loads a chart from an fs.FS — here an in-memory one; an
// embed.FS holding the chart directory works the same way — without any
// network access.
func ExampleLoadFS() {
	fsys := fstest.MapFS{
		"mychart/Chart.yaml":               {Data: []byte("apiVersion: v2\nname: mychart\nversion: 0.1.0\nappVersion: \"2.4\"\n")},
		"mychart/values.yaml":              {Data: []byte("replicas: 1\n")},
		"mychart/templates/configmap.yaml": {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n")},
	}
	ch, err := helm.LoadFS(fsys, "mychart")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(ch.Metadata.Name, ch.Metadata.Version, ch.Metadata.AppVersion, len(ch.Templates), ch.Values["replicas"])
	// Output: mychart 0.1.0 2.4 1 1
}

// ExampleLoad loads a chart directory from the local file system (a
// packaged .tgz works the same way).
func ExampleLoad() {
	ch, err := helm.Load("testdata/charts/app-1")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	fmt.Println(ch.Metadata.Name, ch.Metadata.Version)
	// Output: app 1.0.0
}
