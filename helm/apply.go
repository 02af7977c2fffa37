package helm

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/ensure"
	"github.com/opkit/opkit/outcome"
	"github.com/opkit/opkit/workflow"
)

var (
	gkCRD       = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}
	gkNamespace = schema.GroupKind{Kind: "Namespace"}
)

// apply applies the rendered objects as one workflow: CRDs and Namespaces
// first (each other object depends on all of them), every object through
// the Ensurer (nothing written when the cache shows it as declared), each
// judged ready by workflow.Default. extraKeep are further children not to
// prune (the hooks). It returns the changes, and for a terminal failure the
// failing object ("Kind namespace/name").
func (r *Releaser[T]) apply(ctx context.Context, obj T, ren *rendered, extraKeep []client.Object) (ensure.ChangeSet, string, error) {
	var first, rest []workflow.Node
	var unserved []string
	names := map[string]int{}
	byName := map[string]*unstructured.Unstructured{}
	for _, o := range ren.objects {
		if _, err := r.c.IsObjectNamespaced(o); err != nil {
			if meta.IsNoMatchError(err) {
				// A custom resource whose CRD (in this chart) is not served
				// yet: applied once it is.
				unserved = append(unserved, describe(o, obj.GetNamespace()))
				continue
			}
			return nil, "", err
		}
		name := nodeName(o)
		if n := names[name]; n > 0 {
			names[name] = n + 1
			name = fmt.Sprintf("%s.%d", name, n+1)
		} else {
			names[name] = 1
		}
		byName[name] = o
		typed, err := r.typed(o, obj.GetNamespace())
		if err != nil {
			return nil, describe(o, obj.GetNamespace()), err
		}
		n := workflow.Node{Name: name, Object: typed}
		if gk := o.GroupVersionKind().GroupKind(); gk == gkCRD || gk == gkNamespace {
			first = append(first, n)
		} else {
			rest = append(rest, n)
		}
	}
	var deps []string
	for _, n := range first {
		deps = append(deps, n.Name)
	}
	for i := range rest {
		rest[i].DependsOn = deps
	}
	var cs ensure.ChangeSet
	apply := workflow.ApplierFunc(func(ctx context.Context, owner, child client.Object, keep []client.Object) (bool, error) {
		changes, err := r.ensurer.EnsureKeeping(ctx, owner, append(keep, extraKeep...), child)
		cs = append(cs, changes...)
		changed := false
		for _, ch := range changes {
			changed = changed || (ch.Action != ensure.Unchanged && ch.Action != ensure.Deleted)
		}
		return changed, err
	})
	wf, err := workflow.New(r.c, apply, append(first, rest...), workflow.WithOwnership(owned))
	if err != nil {
		return nil, "", outcome.Terminal(ReasonRenderFailed, err)
	}
	rep, err := wf.Reconcile(ctx, obj)
	if rep != nil {
		if cerr := workflow.SetConditions(obj, rep); cerr != nil && err == nil {
			err = cerr
		}
	}
	if err != nil {
		failed := ""
		if rep != nil && outcome.Classify(err).Class == outcome.ClassTerminal {
			for _, n := range rep.Nodes {
				if n.State == workflow.StateFailed {
					failed = describe(byName[n.Name], obj.GetNamespace())
					break
				}
			}
		}
		return cs, failed, err
	}
	if len(unserved) > 0 {
		return cs, "", outcome.DependencyNotReady("KindNotServed",
			fmt.Sprintf("waiting for the API server to serve the kinds of %s", strings.Join(unserved, ", ")), 0)
	}
	return cs, "", nil
}

// nodeName is a workflow node name for o: kind-name, lower case, with
// characters a condition type cannot hold replaced.
func nodeName(o *unstructured.Unstructured) string {
	s := strings.ToLower(o.GetKind() + "-" + o.GetName())
	if ns := o.GetNamespace(); ns != "" {
		s = strings.ToLower(o.GetKind() + "-" + ns + "." + o.GetName())
	}
	b := []byte(s)
	for i, c := range b {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' && c != '.' && c != '_' {
			b[i] = '-'
		}
	}
	return strings.Trim(string(b), "-._")
}

// typed returns o as the scheme's Go type for its kind when the client's
// scheme has one (so it shares the informers of the builder's typed Owns
// and watches), else o itself. A rendered object that does not fit its type
// is a terminal render error naming it.
func (r *Releaser[T]) typed(o *unstructured.Unstructured, defaultNamespace string) (client.Object, error) {
	obj, err := r.c.Scheme().New(o.GroupVersionKind())
	if err != nil {
		return o.DeepCopy(), nil //nolint:nilerr // not in the scheme: unstructured
	}
	co, ok := obj.(client.Object)
	if !ok {
		return o.DeepCopy(), nil
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, co, true); err != nil {
		return nil, outcome.Terminal(ReasonRenderFailed, fmt.Errorf("%s: %w", describe(o, defaultNamespace), err))
	}
	co.GetObjectKind().SetGroupVersionKind(o.GroupVersionKind())
	return co, nil
}

// empty returns an empty object of gvk: the scheme's type, or unstructured.
func (r *Releaser[T]) empty(gvk schema.GroupVersionKind) client.Object {
	if obj, err := r.c.Scheme().New(gvk); err == nil {
		if co, ok := obj.(client.Object); ok {
			co.GetObjectKind().SetGroupVersionKind(gvk)
			return co
		}
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}
