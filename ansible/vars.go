package ansible

import (
	"strings"
	"unicode"
)

// SnakeCase converts a camelCase or PascalCase name to snake_case the way
// operator-sdk's Ansible operator does for spec fields: an underscore before
// an upper-case letter that follows a lower-case letter or digit, or that
// starts a new word after an acronym ("HTTPPort" → "http_port",
// "replicaCount" → "replica_count", "already_snake" unchanged).
func SnakeCase(s string) string {
	r := []rune(s)
	var b strings.Builder
	for i, c := range r {
		if unicode.IsUpper(c) {
			if i > 0 && (unicode.IsLower(r[i-1]) || unicode.IsDigit(r[i-1]) ||
				(unicode.IsUpper(r[i-1]) && i+1 < len(r) && unicode.IsLower(r[i+1]))) && r[i-1] != '_' {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(c))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// snakeKeys returns v with every map key (recursively, through lists)
// converted with [SnakeCase].
func snakeKeys(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[SnakeCase(k)] = snakeKeys(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = snakeKeys(e)
		}
		return out
	default:
		return v
	}
}

// objectVar is the name of the variable holding the whole object:
// "_" + group with dots as underscores + "_" + lower-case kind, as in
// operator-sdk ("_cache_example_com_memcached").
func objectVar(group, kind string) string {
	g := strings.NewReplacer(".", "_", "-", "_").Replace(group)
	if g == "" {
		return "_" + strings.ToLower(kind)
	}
	return "_" + g + "_" + strings.ToLower(kind)
}
