// Package jsonfield finds struct fields by their JSON names, for the
// packages that read an API object's status by reflection (conditions,
// phase).
package jsonfield

import (
	"reflect"
	"strings"
)

// Name is the name encoding/json gives f: its json tag's name, or the Go
// field name when the tag has none.
func Name(f reflect.StructField) string {
	tag, ok := f.Tag.Lookup("json")
	if !ok {
		return f.Name
	}
	name, _, _ := strings.Cut(tag, ",")
	if name == "" {
		return f.Name
	}
	return name
}

// ByName returns the exported field of struct type t whose JSON name is
// name, and whether there is one. Embedded structs are not searched.
func ByName(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if f.IsExported() && Name(f) == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}
