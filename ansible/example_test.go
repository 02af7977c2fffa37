package ansible_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/opkit/opkit/ansible"
	"github.com/opkit/opkit/conditions"
	"github.com/opkit/opkit/outcome"
)

// writeFiles writes name → content into a fresh directory and returns it.
func writeFiles(files map[string]string) string {
	dir, err := os.MkdirTemp("", "ansible-example-")
	if err != nil {
		panic(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			panic(err)
		}
	}
	return dir
}

// A watches.yaml in operator-sdk's format maps a kind to its playbooks; the
// runner passes a Site's spec in snake_case, its identity as
// ansible_operator_meta and the whole object as _web_example_com_site. This
// only builds the configuration: ansible is not run.
func ExampleLoadWatches() {
	dir := writeFiles(map[string]string{
		"site.yml": "- hosts: localhost\n  tasks: []\n", "cleanup.yml": "- hosts: localhost\n  tasks: []\n",
		"watches.yaml": `- group: web.example.com
  version: v1
  kind: Site
  playbook: site.yml
  maxConcurrentReconciles: 4
  timeout: 90s
  finalizer: {name: web.example.com/cleanup, playbook: cleanup.yml}
`,
	})
	defer func() { _ = os.RemoveAll(dir) }()
	watches, err := ansible.LoadWatches(filepath.Join(dir, "watches.yaml"))
	if err != nil {
		panic(err)
	}
	r, err := ansible.New(watches[0])
	if err != nil {
		panic(err)
	}
	w := r.Watch()
	fmt.Println(w.GVK.Kind, filepath.Base(w.Playbook), w.MaxConcurrent, w.Timeout, r.FinalizerName())

	site := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "web.example.com/v1", "kind": "Site",
		"metadata": map[string]any{"name": "hello", "namespace": "demo"},
		"spec":     map[string]any{"httpPort": int64(8080), "replicaCount": int64(2)},
	}}
	vars, err := r.Vars(site)
	if err != nil {
		panic(err)
	}
	names := make([]string, 0, len(vars))
	for k := range vars {
		names = append(names, k)
	}
	sort.Strings(names)
	fmt.Println(names)
	meta := vars["ansible_operator_meta"].(map[string]any)
	fmt.Println(vars["http_port"], vars["replica_count"], meta["namespace"], meta["name"])

	bad := writeFiles(map[string]string{"w.yaml": "- {version: v1, kind: Site, playbook: site.yml, reconcilePeriod: 1m}\n"})
	defer func() { _ = os.RemoveAll(bad) }()
	_, err = ansible.LoadWatches(filepath.Join(bad, "w.yaml"))
	fmt.Println(err != nil)
	// Output:
	// Site site.yml 4 1m30s web.example.com/cleanup
	// [_web_example_com_site ansible_operator_meta ansible_python_interpreter http_port replica_count]
	// 8080 2 demo hello
	// true
}

func ExampleSnakeCase() {
	for _, s := range []string{"replicaCount", "HTTPPort", "tlsSecretName", "already_snake", "v2Beta"} {
		fmt.Println(ansible.SnakeCase(s))
	}
	// Output:
	// replica_count
	// http_port
	// tls_secret_name
	// already_snake
	// v2_beta
}

// A run whose second task fails: the error is classified (a fail task is a
// user error: Terminal, so Stalled), the Failed condition names the task,
// and the result says what ran before it. This one runs ansible-playbook.
func ExampleRunner_Reconcile() {
	dir := writeFiles(map[string]string{"pb.yml": `- hosts: localhost
  gather_facts: false
  tasks:
    - name: first
      ansible.builtin.command: "true"
    - name: check size
      ansible.builtin.fail: {msg: "size {{ size }} is not small, medium or large"}
      when: size not in ['small', 'medium', 'large']
`})
	defer func() { _ = os.RemoveAll(dir) }()
	w := ansible.Watch{Playbook: filepath.Join(dir, "pb.yml")}
	w.GVK.Group, w.GVK.Version, w.GVK.Kind = "example.com", "v1", "Cache"
	r, err := ansible.New(w)
	if err != nil {
		panic(err)
	}
	cache := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Cache",
		"metadata": map[string]any{"name": "c1", "namespace": "demo"},
		"spec":     map[string]any{"size": "huge"},
		"status":   map[string]any{},
	}}
	res, err := r.Reconcile(context.Background(), cache)
	c := outcome.Classify(err)
	fmt.Println(c.Class, c.Reason)
	fmt.Println(res.FailedTask.Name, res.Ok, res.Changed)
	fmt.Println(conditions.Get(cache, ansible.ConditionFailed).Message)
	// Output:
	// Terminal TaskFailed
	// check size 1 1
	// ansible: demo/c1: task "check size" failed: size huge is not small, medium or large (before it: 1 tasks ok (1 changed: "first"))
}
