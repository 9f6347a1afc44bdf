// Package kjson encodes Kubernetes API types as JSON the way the API server
// would want them applied: like encoding/json, except that a struct-valued
// field tagged omitempty is left out when it is the zero value.
//
// encoding/json never omits a struct, so a Deployment built from
// k8s.io/api types would carry `"status":{}`, `"strategy":{}` and
// `"resources":{}`. Kubernetes types mark optional structs whose presence
// means something as pointers (`emptyDir: {}` stays), and value structs
// with omitempty as "leave out when empty", which is what this encoder does
// (what `omitzero` says in newer tags).
package kjson

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
)

var marshalerType = reflect.TypeFor[json.Marshaler]()

// Marshal encodes v as compact JSON without empty omitempty structs.
func Marshal(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	decoder := json.NewDecoder(bytes.NewReader(raw))
	decoder.UseNumber()
	var tree any
	if err := decoder.Decode(&tree); err != nil {
		return nil, err
	}
	return json.Marshal(prune(reflect.ValueOf(v), tree))
}

func customEncoding(t reflect.Type) bool {
	return t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType)
}

func prune(v reflect.Value, node any) any {
	for v.IsValid() && (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) {
		if v.IsNil() {
			return node
		}
		v = v.Elem()
	}
	if !v.IsValid() || customEncoding(v.Type()) {
		return node
	}
	switch v.Kind() {
	case reflect.Struct:
		if object, ok := node.(map[string]any); ok {
			pruneStruct(v, object)
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return node // []byte is base64 text
		}
		if items, ok := node.([]any); ok {
			for i := range min(len(items), v.Len()) {
				items[i] = prune(v.Index(i), items[i])
			}
		}
	case reflect.Map:
		if object, ok := node.(map[string]any); ok && v.Type().Key().Kind() == reflect.String {
			iter := v.MapRange()
			for iter.Next() {
				key := iter.Key().String()
				if child, ok := object[key]; ok {
					object[key] = prune(iter.Value(), child)
				}
			}
		}
	}
	return node
}

func pruneStruct(v reflect.Value, object map[string]any) {
	t := v.Type()
	for i := range t.NumField() {
		field := t.Field(i)
		tag := field.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, options, _ := strings.Cut(tag, ",")
		value := v.Field(i)
		if field.Anonymous && name == "" {
			// Embedded (inline) struct: its fields are this object's.
			for value.Kind() == reflect.Pointer {
				if value.IsNil() {
					break
				}
				value = value.Elem()
			}
			if value.Kind() == reflect.Struct && !customEncoding(value.Type()) {
				pruneStruct(value, object)
			}
			continue
		}
		if !field.IsExported() {
			continue
		}
		if name == "" {
			name = field.Name
		}
		child, present := object[name]
		if !present {
			continue
		}
		if value.Kind() == reflect.Struct && hasOption(options, "omitempty") && value.IsZero() {
			delete(object, name)
			continue
		}
		object[name] = prune(value, child)
	}
}

func hasOption(options, want string) bool {
	for options != "" {
		var option string
		option, options, _ = strings.Cut(options, ",")
		if option == want {
			return true
		}
	}
	return false
}
