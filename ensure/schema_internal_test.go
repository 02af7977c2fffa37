package ensure

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
)

// refShape walks a schema the way shape did before it kept its nodes: each
// step resolves the type and finds the field by name in the schema.
type refShape struct {
	s  *smdschema.Schema
	tr smdschema.TypeRef
}

func (r refShape) atom() (smdschema.Atom, bool) {
	if r.s == nil {
		return smdschema.Atom{}, false
	}
	return r.s.Resolve(r.tr)
}

func (r refShape) field(name string) refShape {
	a, ok := r.atom()
	if !ok || a.Map == nil {
		return refShape{}
	}
	if f, ok := a.FindField(name); ok {
		return refShape{s: r.s, tr: f.Type}
	}
	if a.Map.ElementType == (smdschema.TypeRef{}) {
		return refShape{}
	}
	return refShape{s: r.s, tr: a.Map.ElementType}
}

func (r refShape) elem() refShape {
	a, ok := r.atom()
	if !ok || a.List == nil {
		return refShape{}
	}
	return refShape{s: r.s, tr: a.List.ElementType}
}

// TestShapeNodesResolveAsTheSchema: every place of several kinds, walked
// through shape's kept nodes, has the atom the schema resolves there —
// list kind and keys, atomic map, struct fields, scalar — including names
// that are not fields (a map's element type, or nothing).
func TestShapeNodesResolveAsTheSchema(t *testing.T) {
	kinds := []schema.GroupVersionKind{
		appsv1.SchemeGroupVersion.WithKind("Deployment"),
		corev1.SchemeGroupVersion.WithKind("Service"),
		corev1.SchemeGroupVersion.WithKind("Pod"),
		corev1.SchemeGroupVersion.WithKind("ConfigMap"),
	}
	s := &schemas{}
	for _, gvk := range kinds {
		sh, err := s.shapeOf(gvk)
		if err != nil {
			t.Fatal(err)
		}
		places := 0
		var walk func(path string, got shape, want refShape, depth int)
		walk = func(path string, got shape, want refShape, depth int) {
			places++
			ga, gok := got.atom()
			wa, wok := want.atom()
			if gok != wok || (ga.Map == nil) != (wa.Map == nil) || (ga.List == nil) != (wa.List == nil) || (ga.Scalar == nil) != (wa.Scalar == nil) {
				t.Fatalf("%s %s: atom %v/%v, schema %v/%v", gvk.Kind, path, ga, gok, wa, wok)
			}
			if ga.Scalar != nil && *ga.Scalar != *wa.Scalar {
				t.Fatalf("%s %s: scalar %v, schema %v", gvk.Kind, path, *ga.Scalar, *wa.Scalar)
			}
			if gl, wl := ga.List, wa.List; gl != nil {
				if gl.ElementRelationship != wl.ElementRelationship || !slices.Equal(gl.Keys, wl.Keys) {
					t.Fatalf("%s %s: list %v %v, schema %v %v", gvk.Kind, path, gl.ElementRelationship, gl.Keys, wl.ElementRelationship, wl.Keys)
				}
			}
			if gm, wm := ga.Map, wa.Map; gm != nil && (gm.ElementRelationship != wm.ElementRelationship || len(gm.Fields) != len(wm.Fields)) {
				t.Fatalf("%s %s: map differs from the schema's", gvk.Kind, path)
			}
			if depth == 0 {
				return
			}
			if ga.Map != nil {
				names := []string{"notAField"}
				for _, f := range wa.Fields {
					names = append(names, f.Name)
				}
				for _, n := range names {
					walk(path+"."+n, got.field(n), want.field(n), depth-1)
				}
			}
			if ga.List != nil {
				walk(path+"[]", got.elem(), want.elem(), depth-1)
			}
		}
		walk("", sh, refShape{s: sh.n.s, tr: sh.n.tr}, 7)
		t.Logf("%s: %d places", gvk.Kind, places)
		if places < 50 {
			t.Errorf("%s: only %d places walked", gvk.Kind, places)
		}
	}
	if (shape{}).field("x") != (shape{}) || (shape{}).elem() != (shape{}) {
		t.Error("the zero shape has fields or elements")
	}
}
