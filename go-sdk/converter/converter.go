// Package converter is the Go SDK for Gantry CRD converters: components of
// the `converter` world, the conversion webhook of one custom resource
// definition as a function.
//
//	package main
//
//	import "gantry.dev/go-sdk/converter"
//
//	type mine struct{}
//
//	func (mine) Convert(object converter.Object, desiredAPIVersion string) (converter.Object, error) {
//		// move fields between the versions' shapes here
//		object["apiVersion"] = desiredAPIVersion
//		return object, nil
//	}
//
//	func init() { converter.Register(mine{}) }
//
//	func main() {}
//
// The host keeps each object's metadata other than labels and annotations
// as it was, so a converter changes only apiVersion, labels, annotations
// and the object's own fields. A conversion must be lossless both ways:
// what one version cannot hold goes into an annotation and comes back
// from it.
//
// A plugin imports this package, the reconciler SDK (gantry.dev/go-sdk) or
// the policy package, only one of them: each brings its world's exports.
package converter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Object is one Kubernetes object as decoded JSON. Numbers are
// [json.Number], so they come back exactly as they were written.
type Object = map[string]any

// Converter converts one object of a custom resource from the version its
// apiVersion names to another.
type Converter interface {
	// Convert returns object at desiredAPIVersion (group/version). An
	// error says why it cannot be converted; the API server's client sees
	// it, and nothing is stored.
	Convert(object Object, desiredAPIVersion string) (Object, error)
}

// Func turns a function into a [Converter].
type Func func(object Object, desiredAPIVersion string) (Object, error)

// Convert calls f.
func (f Func) Convert(object Object, desiredAPIVersion string) (Object, error) {
	return f(object, desiredAPIVersion)
}

var registered Converter

// Register makes c the plugin's converter. Call it from an init function
// of the main package (main itself never runs in the component).
func Register(c Converter) { registered = c }

// VersionOf is the version part of an object's apiVersion (group/version
// or a bare version), "" when it has none.
func VersionOf(object Object) string {
	apiVersion, _ := object["apiVersion"].(string)
	return apiVersion[strings.LastIndexByte(apiVersion, '/')+1:]
}

// ConvertAll converts each of objects (JSON) with c, as the host asks it
// to: one object out per object in, in order. An error names the first
// object that could not be converted (namespace/name).
func ConvertAll(c Converter, objects [][]byte, desiredAPIVersion string) ([][]byte, error) {
	out := make([][]byte, len(objects))
	for i, raw := range objects {
		object, err := Decode(raw)
		if err != nil {
			return nil, fmt.Errorf("object %d: %w", i, err)
		}
		name := describe(object)
		converted, err := c.Convert(object, desiredAPIVersion)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if converted == nil {
			return nil, fmt.Errorf("%s: the converter returned no object", name)
		}
		if out[i], err = Encode(converted); err != nil {
			return nil, fmt.Errorf("%s: the converted object does not encode: %w", name, err)
		}
	}
	return out, nil
}

// Call runs the registered converter as the host would (see [ConvertAll]).
// The component's export uses it.
func Call(objects [][]byte, desiredAPIVersion string) ([][]byte, error) {
	if registered == nil {
		return nil, errors.New("the plugin registered no converter: call converter.Register in an init function")
	}
	return ConvertAll(registered, objects, desiredAPIVersion)
}

// Decode reads one object from JSON, numbers as [json.Number].
func Decode(raw []byte) (Object, error) {
	decoder := json.NewDecoder(bytes.NewReader(raw))
	decoder.UseNumber()
	var object Object
	if err := decoder.Decode(&object); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	if object == nil {
		return nil, errors.New("not a JSON object: null")
	}
	if decoder.More() {
		return nil, errors.New("not a JSON object: more after it")
	}
	return object, nil
}

// Encode writes an object as JSON (without escaping <, > and &).
func Encode(object Object) ([]byte, error) {
	var buf bytes.Buffer
	encoder := json.NewEncoder(&buf)
	encoder.SetEscapeHTML(false)
	if err := encoder.Encode(object); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// describe is namespace/name (or name) of an object, for messages.
func describe(object Object) string {
	metadata, _ := object["metadata"].(map[string]any)
	name, _ := metadata["name"].(string)
	if namespace, _ := metadata["namespace"].(string); namespace != "" {
		return namespace + "/" + name
	}
	return name
}
