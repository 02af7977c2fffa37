package manifest_test

import (
	"fmt"
	"testing/fstest"

	"github.com/opkit/opkit/examples/internal/manifest"
)

func ExampleObjects() {
	fsys := fstest.MapFS{
		"samples/b.yaml": {Data: []byte("kind: WebApp\nmetadata:\n  name: second\n")},
		// kustomize's own file is not an object: skipped.
		"samples/kustomization.yaml": {Data: []byte("resources:\n- a.yaml\n- b.yaml\n")},
		"samples/a.yaml":             {Data: []byte("kind: WebApp\nmetadata:\n  name: first\n---\n\n---\nkind: WebApp\nmetadata:\n  name: also-first\n")},
	}
	objs, err := manifest.Objects(fsys, "samples")
	if err != nil {
		panic(err)
	}
	for _, o := range objs {
		fmt.Println(o.GetKind(), o.GetName())
	}
	// Output:
	// WebApp first
	// WebApp also-first
	// WebApp second
}

func ExampleWebhooks() {
	fsys := fstest.MapFS{
		"webhook/manifests.yaml": {Data: []byte("kind: ConfigMap\nmetadata:\n  name: stray\n")},
	}
	_, _, err := manifest.Webhooks(fsys, "webhook")
	fmt.Println(err)
	// Output:
	// webhook/manifests.yaml: unexpected kind "ConfigMap"
}
