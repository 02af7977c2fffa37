package ensure

import (
	"bytes"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// ownedFields returns the fields manager owns through Apply on the main
// resource (not a subresource), or ok=false when the object carries no such
// entry — a cache that strips managedFields, or an object we never applied.
func ownedFields(entries []metav1.ManagedFieldsEntry, manager string) (set *fieldpath.Set, ok bool) {
	set = &fieldpath.Set{}
	for _, e := range entries {
		if e.Manager != manager || e.Operation != metav1.ManagedFieldsOperationApply || e.Subresource != "" || e.FieldsV1 == nil {
			continue
		}
		s := &fieldpath.Set{}
		if err := s.FromJSON(bytes.NewReader(e.FieldsV1.GetRawBytes())); err != nil {
			// Unreadable ownership: report "not ok" so the caller applies
			// rather than trusting a partial picture.
			return nil, false
		}
		set = set.Union(s)
		ok = true
	}
	return set, ok
}

// ownsUndeclared reports whether manager owns a field that d no longer
// declares. Applying d then removes that field (or releases it to a co-owner):
// this is how SSA removes what an operator stopped wanting, so it is drift.
func ownsUndeclared(owned *fieldpath.Set, d map[string]any) bool {
	found := false
	owned.Iterate(func(p fieldpath.Path) {
		if !found && !declaresPath(d, p) {
			found = true
		}
	})
	return found
}

func declaresPath(d any, p fieldpath.Path) bool {
	cur := d
	for _, pe := range p {
		switch {
		case pe.FieldName != nil:
			m, ok := cur.(map[string]any)
			if !ok {
				return false
			}
			v, ok := m[*pe.FieldName]
			if !ok {
				return false
			}
			cur = v
		case pe.Key != nil:
			l, ok := cur.([]any)
			if !ok {
				return false
			}
			var next any
			for _, e := range l {
				m, ok := e.(map[string]any)
				if !ok {
					continue
				}
				match := true
				for _, f := range *pe.Key {
					v, has := m[f.Name]
					// A key field the declaration omits was defaulted by the
					// server (a port's protocol), so it cannot disagree.
					if has && !scalarEqual(v, f.Value.Unstructured()) {
						match = false
						break
					}
				}
				if match {
					next = m
					break
				}
			}
			if next == nil {
				return false
			}
			cur = next
		case pe.Value != nil:
			l, ok := cur.([]any)
			if !ok {
				return false
			}
			want := (*pe.Value).Unstructured()
			var hit bool
			for _, e := range l {
				if scalarEqual(e, want) {
					hit = true
					break
				}
			}
			if !hit {
				return false
			}
			cur = want
		case pe.Index != nil:
			l, ok := cur.([]any)
			if !ok || *pe.Index >= len(l) {
				return false
			}
			cur = l[*pe.Index]
		}
	}
	return true
}

// legacyManagers returns the client-side (Update) managers on the main
// resource whose fields should be folded into the apply manager before the
// next apply (Kubernetes #99003): without that, fields they own survive being
// dropped from the declaration forever.
func legacyManagers(entries []metav1.ManagedFieldsEntry, candidates map[string]bool) map[string]bool {
	var out map[string]bool
	for _, e := range entries {
		if e.Operation == metav1.ManagedFieldsOperationUpdate && e.Subresource == "" && candidates[e.Manager] {
			if out == nil {
				out = map[string]bool{}
			}
			out[e.Manager] = true
		}
	}
	return out
}
