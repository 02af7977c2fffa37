package securitycheck_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/opkit/opkit/examples/internal/manifest"
	"github.com/opkit/opkit/testenv/hardening"
)

// documents returns every YAML document in the example directories matching
// pattern (relative to examples/), keyed by directory.
func documents(t *testing.T, pattern string) map[string][][]byte {
	t.Helper()
	examples := os.DirFS(filepath.Join("..", ".."))
	dirs, err := fs.Glob(examples, pattern)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][][]byte{}
	for _, dir := range dirs {
		err := manifest.EachDocument(examples, dir, func(doc []byte) error {
			out[dir] = append(out[dir], doc)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func kindOf(t *testing.T, doc []byte) string {
	var meta struct{ Kind string }
	if err := yaml.Unmarshal(doc, &meta); err != nil {
		t.Fatal(err)
	}
	return meta.Kind
}

func TestOperatorDeploymentsAreHardened(t *testing.T) {
	seen := 0
	for file, docs := range documents(t, "*/config/manager") {
		for _, doc := range docs {
			if kindOf(t, doc) != "Deployment" {
				continue
			}
			seen++
			var d appsv1.Deployment
			if err := yaml.UnmarshalStrict(doc, &d); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			for _, p := range hardening.Deployment(&d) {
				t.Errorf("%s: %s", file, p)
			}
		}
	}
	if seen < 4 {
		t.Fatalf("checked %d operator Deployments, want one per example with manifests (webapp, bucket, database, tenant)", seen)
	}
}

func TestGeneratedRBACHasNoWildcards(t *testing.T) {
	seen := 0
	for file, docs := range documents(t, "*/config/rbac") {
		for _, doc := range docs {
			var rules []rbacv1.PolicyRule
			switch kindOf(t, doc) {
			case "ClusterRole":
				var r rbacv1.ClusterRole
				if err := yaml.UnmarshalStrict(doc, &r); err != nil {
					t.Fatalf("%s: %v", file, err)
				}
				rules = r.Rules
			case "Role":
				var r rbacv1.Role
				if err := yaml.UnmarshalStrict(doc, &r); err != nil {
					t.Fatalf("%s: %v", file, err)
				}
				rules = r.Rules
			default:
				continue
			}
			seen++
			for _, rule := range rules {
				for _, list := range [][]string{rule.APIGroups, rule.Resources, rule.Verbs} {
					if slices.Contains(list, "*") {
						t.Errorf("%s: wildcard in rule %+v", file, rule)
					}
				}
				if slices.Contains(rule.Resources, "secrets") && slices.Contains(rule.Verbs, "list") && !bytes.Contains([]byte(file), []byte("bucket")) && !bytes.Contains([]byte(file), []byte("chart")) {
					t.Errorf("%s: only the bucket operator (connection Secrets) and the chart operator (Helm release history, stored in Secrets by Helm's storage driver) handle Secrets; rule %+v", file, rule)
				}
			}
		}
	}
	if seen < 3 {
		t.Fatalf("checked %d roles, want the generated role of every example", seen)
	}
}
