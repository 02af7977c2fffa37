package jsonfield

import (
	"reflect"
	"testing"
)

func TestByName(t *testing.T) {
	type status struct {
		Phase      string `json:"phase,omitempty"`
		Untagged   int
		NoName     bool `json:",omitempty"`
		unexported string
		Hidden     string `json:"hidden"`
	}
	st := reflect.TypeFor[status]()
	for name, want := range map[string]string{"phase": "Phase", "Untagged": "Untagged", "NoName": "NoName", "hidden": "Hidden"} {
		f, ok := ByName(st, name)
		if !ok || f.Name != want {
			t.Errorf("ByName(%q) = %q, %v; want %q", name, f.Name, ok, want)
		}
	}
	for _, name := range []string{"unexported", "Phase", "missing"} {
		if f, ok := ByName(st, name); ok {
			t.Errorf("ByName(%q) found %q", name, f.Name)
		}
	}
	_ = status{}.unexported
}
