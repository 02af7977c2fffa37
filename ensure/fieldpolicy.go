package ensure

import (
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// fieldPolicy is a per-kind rule for some declared fields.
type fieldPolicy struct {
	kind       client.Object
	createOnly bool // else: recreate on change
	paths      [][]string
}

func splitPaths(paths []string) [][]string {
	out := make([][]string, 0, len(paths))
	for _, p := range paths {
		if p = strings.Trim(p, "."); p != "" {
			out = append(out, strings.Split(p, "."))
		}
	}
	return out
}

// WithCreateOnly makes the fields at paths (dot-separated field names from
// the object's root, e.g. "spec.selector"; no list indexes) of every child of
// kind's type create-only: they are written when the object is created and
// never patched afterwards. On an existing object the live value is kept, as
// if it had been declared (it stays in the record, [AnnotationDeclared], so
// it is never removed either); a path the live object does not have is left
// unset. This is what an operand whose immutable field (a selector label)
// changed between operator versions needs: the new version's other changes
// (replicas, image) still apply, and the object is not Stalled on a field it
// cannot change. It applies to [Ensurer.Ensure] and [Ensurer.CreateOrPatch].
func WithCreateOnly(kind client.Object, paths ...string) Option {
	return func(e *Ensurer) {
		e.policyProtos = append(e.policyProtos, fieldPolicy{kind: kind, createOnly: true, paths: splitPaths(paths)})
	}
}

// WithRecreateOnChange makes a declared value at one of paths (as in
// [WithCreateOnly]) that the live object of kind's type does not hold a
// reason to delete the object (UID precondition, foreground propagation not
// awaited) and create it as declared, reported as [Recreated] — for fields
// the API server refuses to change, where replacing the object is
// acceptable (a Job's template, a Service's clusterIP family). The
// comparison is the one ensure uses everywhere (fields the declaration does
// not set are ignored), so server defaults inside the path do not cause a
// recreate. Unlike [WithRecreateOnImmutable], which recreates after any
// immutable-field rejection of any kind, this names the fields, and the
// recreate happens without a rejected write first.
func WithRecreateOnChange(kind client.Object, paths ...string) Option {
	return func(e *Ensurer) {
		e.policyProtos = append(e.policyProtos, fieldPolicy{kind: kind, paths: splitPaths(paths)})
	}
}

// keepCreateOnly replaces decl's create-only fields by live's.
func (e *Ensurer) keepCreateOnly(t *target, decl, live map[string]any) {
	for _, fp := range e.policies[t.key.gvk] {
		if !fp.createOnly {
			continue
		}
		for _, p := range fp.paths {
			if v, ok := pathValue(live, p); ok {
				setPath(decl, p, runtime.DeepCopyJSONValue(v))
			} else {
				deletePath(decl, p)
			}
		}
	}
}

// mustRecreate reports a declared recreate-on-change field live does not hold.
func (e *Ensurer) mustRecreate(t *target, decl, live map[string]any) bool {
	for _, fp := range e.policies[t.key.gvk] {
		if fp.createOnly {
			continue
		}
		for _, p := range fp.paths {
			d, ok := pathValue(decl, p)
			if !ok {
				continue
			}
			l, _ := pathValue(live, p)
			sh := t.shape
			for _, f := range p {
				sh = sh.field(f)
			}
			if !subset(d, l, sh, keyedSubset) {
				return true
			}
		}
	}
	return false
}

func pathValue(m map[string]any, p []string) (any, bool) {
	var v any = m
	for _, f := range p {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = mm[f]; !ok {
			return nil, false
		}
	}
	return v, true
}

func setPath(m map[string]any, p []string, v any) {
	for _, f := range p[:len(p)-1] {
		next, ok := m[f].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[f] = next
		}
		m = next
	}
	m[p[len(p)-1]] = v
}

func deletePath(m map[string]any, p []string) {
	for _, f := range p[:len(p)-1] {
		next, ok := m[f].(map[string]any)
		if !ok {
			return
		}
		m = next
	}
	delete(m, p[len(p)-1])
}
