package reconciler

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// ownerAnnotation formats ensure.AnnotationOwner as ensure writes it
// (ensure's ownerInfo): "Kind.group namespace/name", "Kind name" for a
// cluster-scoped owner, ".group" left out for the core group.
func ownerAnnotation(gk schema.GroupKind, key types.NamespacedName) string {
	kind := gk.Kind
	if gk.Group != "" {
		kind += "." + gk.Group
	}
	if key.Namespace != "" {
		return kind + " " + key.Namespace + "/" + key.Name
	}
	return kind + " " + key.Name
}

// validSegment is what the API server accepts as an object's name or
// namespace at the least: non-empty, no "/" or "%", not "." or "..".
func validSegment(s string) bool { return s != "" && len(content.IsPathSegmentName(s)) == 0 }

// FuzzOwnerKeyOf feeds ownerKeyOf, which reads ensure.AnnotationOwner back
// from a child anyone who may edit it can rewrite, arbitrary values. It must
// not panic; an annotation ensure wrote for an owner of the kind asked for
// must give back that owner's key; and a key it accepts must be one the API
// could hold (a name and, if any, a namespace that are valid path segments)
// and must format back to the annotation it came from — anything else is not
// an owner key (false and the zero key), never part of one.
func FuzzOwnerKeyOf(f *testing.F) {
	for _, s := range []string{
		"WebApp.apps.example.com default/web", "WebApp.apps.example.com web", "Namespace team-a",
		"WebApp.apps.example.com /web", "WebApp.apps.example.com ns/", "Other.apps.example.com default/web",
		"WebApp.apps.example.com ", "WebApp.apps.example.com", "", " ",
	} {
		f.Add(s, "apps.example.com", "WebApp", "default", "web")
	}
	f.Add("", "", "Namespace", "", "team-a")
	f.Fuzz(func(t *testing.T, annotation, group, kind, ns, name string) {
		gk := schema.GroupKind{Group: group, Kind: kind}
		key, ok := ownerKeyOf(annotation, gk)
		switch {
		case !ok && key != (types.NamespacedName{}):
			t.Fatalf("ownerKeyOf(%q, %v) = %v, false: a partial key", annotation, gk, key)
		case ok && (!validSegment(key.Name) || key.Namespace != "" && !validSegment(key.Namespace)):
			t.Fatalf("ownerKeyOf(%q, %v) = %v, true: not an object key", annotation, gk, key)
		case ok && ownerAnnotation(gk, key) != annotation:
			t.Fatalf("ownerKeyOf(%q, %v) = %v, true, which formats as %q", annotation, gk, key, ownerAnnotation(gk, key))
		}

		// Round trip: what ensure writes for a valid owner reads back.
		if kind == "" || !validSegment(name) || ns != "" && !validSegment(ns) {
			return
		}
		for _, r := range kind + group {
			if r == ' ' {
				return // no kind or group holds a space
			}
		}
		want := types.NamespacedName{Namespace: ns, Name: name}
		if got, ok := ownerKeyOf(ownerAnnotation(gk, want), gk); !ok || got != want {
			t.Fatalf("ownerKeyOf(%q, %v) = %v, %v; want %v, true", ownerAnnotation(gk, want), gk, got, ok, want)
		}
	})
}
