package helm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	commonutil "helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/engine"
	rspb "helm.sh/helm/v4/pkg/release/v1"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/opkit/opkit/outcome"
)

// rendered is one chart rendered with one set of values.
type rendered struct {
	manifest string                       // as Helm stores it: "---\n# Source: …" documents
	objects  []*unstructured.Unstructured // CRDs (crds/) first, then templates in Helm's install order
	hooks    []*rspb.Hook
	notes    string
}

// supportedHooks are the hook events the Releaser runs; test hooks are
// ignored (as by helm install); any other event stalls the release.
var supportedHooks = map[rspb.HookEvent]bool{
	rspb.HookPreInstall: true, rspb.HookPostInstall: true,
	rspb.HookPreUpgrade: true, rspb.HookPostUpgrade: true,
	rspb.HookPreRollback: true, rspb.HookPostRollback: true,
	rspb.HookTest: true,
}

// render renders ch with config for the release name/namespace at revision,
// the way helm install and helm upgrade do, without a cluster: the
// capabilities are caps, lookup returns nothing. Errors are terminal
// (Stalled): the chart or the values are wrong, and retrying will not help.
func render(ctx context.Context, ch *chart.Chart, config map[string]any, name, namespace string, revision int, upgrade bool, caps *common.Capabilities) (*rendered, error) {
	if ch == nil || ch.Metadata == nil {
		return nil, outcome.Terminal(ReasonRenderFailed, errors.New("no chart"))
	}
	if err := ch.Validate(); err != nil {
		return nil, outcome.Terminal(ReasonRenderFailed, fmt.Errorf("chart %s: %w", ch.Name(), err))
	}
	if ch.Metadata.KubeVersion != "" && !chartutil.IsCompatibleRange(ch.Metadata.KubeVersion, caps.KubeVersion.String()) {
		return nil, outcome.Terminal(ReasonRenderFailed, fmt.Errorf("chart %s requires kubeVersion %s, incompatible with Kubernetes %s",
			ch.Name(), ch.Metadata.KubeVersion, caps.KubeVersion.Version))
	}
	opts := common.ReleaseOptions{Name: name, Namespace: namespace, Revision: revision, IsInstall: !upgrade, IsUpgrade: upgrade}
	merged, err := commonutil.CoalesceValues(ch, config)
	if err != nil {
		return nil, outcome.Terminal(ReasonInvalidValues, fmt.Errorf("chart %s: %w", ch.Name(), err))
	}
	if err := commonutil.ValidateAgainstSchema(ch, merged); err != nil {
		return nil, outcome.Terminal(ReasonInvalidValues, fmt.Errorf("values do not match the schema of chart %s: %w", ch.Name(), err))
	}
	vals, err := commonutil.ToRenderValuesWithSchemaValidation(ch, config, opts, caps, true)
	if err != nil {
		return nil, outcome.Terminal(ReasonInvalidValues, fmt.Errorf("chart %s: %w", ch.Name(), err))
	}
	var e engine.Engine
	files, err := e.RenderWithContext(ctx, ch, vals)
	if err != nil {
		return nil, outcome.Terminal(ReasonRenderFailed, fmt.Errorf("chart %s: %w", ch.Name(), err))
	}
	out := &rendered{}
	for k, v := range files {
		if strings.HasSuffix(k, "NOTES.txt") {
			if k == path.Join(ch.Name(), "templates", "NOTES.txt") {
				out.notes = v
			}
			delete(files, k)
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(files, caps.APIVersions, releaseutil.InstallOrder)
	if err != nil {
		return nil, outcome.Terminal(ReasonRenderFailed, fmt.Errorf("chart %s: %w", ch.Name(), err))
	}
	var b strings.Builder
	for _, crd := range ch.CRDObjects() {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", crd.Filename, string(crd.File.Data))
		objs, err := parseObjects(crd.Filename, string(crd.File.Data))
		if err != nil {
			return nil, outcome.Terminal(ReasonRenderFailed, err)
		}
		out.objects = append(out.objects, objs...)
	}
	for _, m := range manifests {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", m.Name, m.Content)
		objs, err := parseObjects(m.Name, m.Content)
		if err != nil {
			return nil, outcome.Terminal(ReasonRenderFailed, err)
		}
		out.objects = append(out.objects, objs...)
	}
	out.manifest = b.String()
	for _, h := range hooks {
		for _, ev := range h.Events {
			if !supportedHooks[ev] {
				return nil, outcome.Terminal(ReasonUnsupportedHook, fmt.Errorf("chart %s: hook %s %s (%s) fires on %q, which this operator does not run (supported: pre/post-install, pre/post-upgrade, pre/post-rollback)",
					ch.Name(), h.Kind, h.Name, h.Path, ev))
			}
		}
		out.hooks = append(out.hooks, h)
	}
	return out, nil
}

// parseObjects parses the YAML documents of one rendered file.
func parseObjects(source, content string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for doc := range strings.SplitSeq(content, "\n---") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() == "" || u.GetAPIVersion() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("%s: an object needs apiVersion, kind and metadata.name", source)
		}
		if strings.HasSuffix(u.GetKind(), "List") {
			return nil, fmt.Errorf("%s: %s is not supported; render its items as separate documents", source, u.GetKind())
		}
		out = append(out, u)
	}
	return out, nil
}

// digest identifies a release's inputs: the chart's content (metadata,
// templates, values, schema, files, CRDs, recursively its dependencies) and
// the user-supplied values. Two reconciles with the same digest render the
// same release, so no new revision is made.
func digest(ch *chart.Chart, config map[string]any) (string, error) {
	h := sha256.New()
	var walk func(c *chart.Chart) error
	walk = func(c *chart.Chart) error {
		meta, err := json.Marshal(c.Metadata)
		if err != nil {
			return err
		}
		vals, err := json.Marshal(c.Values)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "chart %d %s\nvalues %d %s\nschema %d %s\n", len(meta), meta, len(vals), vals, len(c.Schema), c.Schema)
		var files []*common.File
		files = append(files, c.Templates...)
		files = append(files, c.Files...)
		sort.SliceStable(files, func(i, j int) bool { return files[i].Name < files[j].Name })
		for _, f := range files {
			fmt.Fprintf(h, "file %d %s %d %s\n", len(f.Name), f.Name, len(f.Data), f.Data)
		}
		deps := append([]*chart.Chart(nil), c.Dependencies()...)
		sort.SliceStable(deps, func(i, j int) bool { return deps[i].Name() < deps[j].Name() })
		for _, d := range deps {
			fmt.Fprintf(h, "dependency %s\n", d.Name())
			if err := walk(d); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(ch); err != nil {
		return "", err
	}
	cfg, err := json.Marshal(config) // encoding/json sorts map keys
	if err != nil {
		return "", err
	}
	fmt.Fprintf(h, "config %d %s\n", len(cfg), cfg)
	return hex.EncodeToString(h.Sum(nil))[:40], nil
}
