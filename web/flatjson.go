package web

import (
	"encoding"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// flatFields is how decodeJSON's fast path fills a struct of strings: the
// JSON name of each field, in field order. A nil *flatFields says the
// struct has a field the fast path does not fill (not a string, or with
// no plain JSON name), and every body for it takes the slow path.
type flatFields struct {
	names []string
}

// flatTypes caches flatFields per struct type.
var flatTypes sync.Map // reflect.Type -> *flatFields

// flatFieldsOf returns the fast path's plan for dst, a pointer to a
// struct, or nil when there is none.
func flatFieldsOf(t reflect.Type) *flatFields {
	if v, ok := flatTypes.Load(t); ok {
		return v.(*flatFields)
	}
	f := planFlat(t)
	flatTypes.Store(t, f)
	return f
}

func planFlat(t reflect.Type) *flatFields {
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return nil
	}
	st := t.Elem()
	f := &flatFields{}
	folded := map[string]bool{}
	for i := range st.NumField() {
		sf := st.Field(i)
		name, opts, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if !sf.IsExported() || !plainString(sf.Type) || !plainOptions(opts) || name == "" || name == "-" ||
			!plainJSONName(name) || folded[foldKey(name)] {
			return nil
		}
		folded[foldKey(name)] = true
		f.names = append(f.names, name)
	}
	return f
}

// plainString reports whether encoding/json decodes a JSON string into a
// value of t as the string itself: t is a string type that does not
// decode itself (json.Unmarshaler, encoding.TextUnmarshaler).
func plainString(t reflect.Type) bool {
	if t.Kind() != reflect.String {
		return false
	}
	p := reflect.PointerTo(t)
	return !p.Implements(jsonUnmarshaler) && !p.Implements(textUnmarshaler)
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// plainOptions reports whether a json tag's options, after its name,
// leave decoding alone: omitempty and omitzero only change encoding; the
// string option makes encoding/json want a JSON string inside the string.
func plainOptions(opts string) bool {
	for opts != "" {
		var opt string
		opt, opts, _ = strings.Cut(opts, ",")
		if opt != "omitempty" && opt != "omitzero" {
			return false
		}
	}
	return true
}

// plainJSONName reports whether name is written in JSON as itself: no
// byte that a JSON string escapes, or that the fast path stops at.
func plainJSONName(name string) bool {
	for i := range len(name) {
		if c := name[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// decodeFlat reads body, already known to be valid UTF-8, when it is
// the common shape of a sign-in or any other body of string fields:
// one object whose keys are each exactly one of names, at most once,
// and whose values are strings without escapes, with whitespace only
// around. vals[i] is the value of names[i] when bit i of present is set.
// For anything else it reports false, and the caller decodes body with
// encoding/json, which then decides: every body this accepts,
// encoding/json with decodeJSON's checks reads to the same values
// (FuzzDecodeFlat).
func decodeFlat(body []byte, names []string, vals []string) (present uint64, ok bool) {
	var seen uint64
	if len(names) > 64 {
		return 0, false
	}
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return 0, false
	}
	i = skipSpace(body, i+1)
	if i < len(body) && body[i] == '}' {
		return seen, skipSpace(body, i+1) == len(body)
	}
	for {
		key, next, ok := flatString(body, i)
		if !ok {
			return 0, false
		}
		k := -1
		for j, name := range names {
			if string(key) == name {
				k = j
				break
			}
		}
		if k < 0 || seen&(1<<k) != 0 {
			return 0, false
		}
		seen |= 1 << k
		i = skipSpace(body, next)
		if i >= len(body) || body[i] != ':' {
			return 0, false
		}
		val, next, ok := flatString(body, skipSpace(body, i+1))
		if !ok {
			return 0, false
		}
		vals[k] = string(val)
		i = skipSpace(body, next)
		if i >= len(body) {
			return 0, false
		}
		switch body[i] {
		case ',':
			i = skipSpace(body, i+1)
		case '}':
			return seen, skipSpace(body, i+1) == len(body)
		default:
			return 0, false
		}
	}
}

// flatString reads a JSON string without escapes or control characters
// at body[i:], and returns its contents and the index after it.
func flatString(body []byte, i int) (s []byte, next int, ok bool) {
	if i >= len(body) || body[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(body); j++ {
		switch c := body[j]; {
		case c == '"':
			return body[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20:
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(body []byte, i int) int {
	for i < len(body) && (body[i] == ' ' || body[i] == '\t' || body[i] == '\n' || body[i] == '\r') {
		i++
	}
	return i
}

// decodeFlatInto is decodeFlat for dst, a pointer to a struct of
// strings; false, with dst untouched, when the fast path does not apply.
func decodeFlatInto(body []byte, dst any) bool {
	f := flatFieldsOf(reflect.TypeOf(dst))
	if f == nil {
		return false
	}
	var buf [4]string
	vals := buf[:0]
	if len(f.names) > len(buf) {
		vals = make([]string, 0, len(f.names))
	}
	vals = vals[:len(f.names)]
	present, ok := decodeFlat(body, f.names, vals)
	if !ok {
		return false
	}
	v := reflect.ValueOf(dst).Elem()
	for i, s := range vals {
		if present&(1<<i) != 0 {
			v.Field(i).SetString(s)
		}
	}
	return true
}

// fieldNames caches jsonNames per struct type.
var fieldNames sync.Map // reflect.Type -> []string

// jsonNames returns the JSON names of the fields of *dst, a struct, as
// encoding/json decodes them: every field's, not only the strings' a
// flatFields plan has, since a body with a field of another type (the
// second step's remember, a passkey's credential) is read by
// encoding/json alone. Nil for a dst of another kind.
func jsonNames(t reflect.Type) []string {
	if v, ok := fieldNames.Load(t); ok {
		return v.([]string)
	}
	var names []string
	if t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct {
		st := t.Elem()
		for i := range st.NumField() {
			sf := st.Field(i)
			name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
			if !sf.IsExported() || name == "-" {
				continue
			}
			if name == "" {
				name = sf.Name
			}
			names = append(names, name)
		}
	}
	fieldNames.Store(t, names)
	return names
}

// inexactName returns a key of the JSON object body that encoding/json
// would take for one of dst's fields (jsonNames) though it is not
// written as the field's name; the first in sorted order, so that the
// answer is the same every time. A body that is no object, or a dst that
// is no struct, has none: the decoder decides.
func inexactName(body []byte, dst any) (string, bool) {
	names := jsonNames(reflect.TypeOf(dst))
	if names == nil {
		return "", false
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil {
		return "", false
	}
	var found []string
	for key := range fields {
		for _, name := range names {
			if key != name && foldKey(key) == foldKey(name) {
				found = append(found, key)
				break
			}
		}
	}
	if len(found) == 0 {
		return "", false
	}
	slices.Sort(found)
	return found[0], true
}
