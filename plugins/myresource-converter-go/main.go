// The conversion webhook of MyResource as a Gantry converter, in Go: the
// port of plugins/myresource-converter (same conversions and refusals).
// example.com/v1alpha1 <-> example.com/v1:
//
//	v1alpha1              v1
//	spec.replicas         spec.instances (renamed)
//	spec.image "r:t@d"    spec.image {repository, tag, digest} (split)
//	-                     spec.paused (new in v1)
//
// Every other field goes across unchanged. What v1alpha1 cannot hold (the
// fields new in v1) travels in the annotation [V1Fields] while an object
// is at v1alpha1, and comes back from it at v1, so a round trip either way
// gives the object back unchanged.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"gantry.dev/go-sdk/converter"
)

// V1Fields is the annotation holding, at v1alpha1, the v1 fields that
// version lacks.
const V1Fields = "myresource.example.com/v1-fields"

// v1Only are the spec fields only v1 has.
var v1Only = []string{"paused"}

// MyResource is the converter.
type MyResource struct{}

// Convert converts object to desiredAPIVersion.
func (MyResource) Convert(object converter.Object, desiredAPIVersion string) (converter.Object, error) {
	from := converter.VersionOf(object)
	to := desiredAPIVersion[strings.LastIndexByte(desiredAPIVersion, '/')+1:]
	var err error
	switch {
	case from == to:
	case from == "v1alpha1" && to == "v1":
		err = up(object)
	case from == "v1" && to == "v1alpha1":
		err = down(object)
	default:
		err = fmt.Errorf("cannot convert MyResource from %s to %s", from, to)
	}
	if err != nil {
		return nil, err
	}
	object["apiVersion"] = desiredAPIVersion
	return object, nil
}

func init() { converter.Register(MyResource{}) }

func main() {}

// SplitImage splits repository[:tag][@digest] into its parts; a ":"
// before the last "/" is a registry port, not a tag.
func SplitImage(image string) map[string]any {
	name, digest, hasDigest := strings.Cut(image, "@")
	slash := strings.LastIndexByte(name, '/') + 1
	parts := map[string]any{"repository": name}
	if i := strings.LastIndexByte(name[slash:], ':'); i >= 0 {
		parts["repository"] = name[:slash+i]
		parts["tag"] = name[slash+i+1:]
	}
	if hasDigest {
		parts["digest"] = digest
	}
	return parts
}

// JoinImage joins the parts of an image again; it refuses a repository
// that would not split back into itself.
func JoinImage(image any) (string, error) {
	parts, _ := image.(map[string]any)
	text := func(field string) (string, bool, error) {
		switch v := parts[field].(type) {
		case nil:
			return "", false, nil
		case string:
			return v, true, nil
		default:
			return "", false, fmt.Errorf("spec.image.%s must be a string, not %s", field, show(v))
		}
	}
	repository, ok, err := text("repository")
	if err != nil {
		return "", err
	}
	if !ok {
		return "", errors.New("spec.image.repository is missing")
	}
	last := repository[strings.LastIndexByte(repository, '/')+1:]
	if strings.Contains(repository, "@") || strings.Contains(last, ":") {
		return "", fmt.Errorf("spec.image.repository %q must not carry a tag or digest; use spec.image.tag and spec.image.digest", repository)
	}
	joined := repository
	for _, part := range []struct{ field, sep string }{{"tag", ":"}, {"digest", "@"}} {
		value, ok, err := text(part.field)
		if err != nil {
			return "", err
		}
		if ok {
			joined += part.sep + value
		}
	}
	return joined, nil
}

// show is a JSON value as JSON, for messages.
func show(v any) string {
	text, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(text)
}

func specOf(object converter.Object) map[string]any {
	spec, _ := object["spec"].(map[string]any)
	return spec
}

func annotationsOf(object converter.Object) map[string]any {
	metadata, _ := object["metadata"].(map[string]any)
	annotations, _ := metadata["annotations"].(map[string]any)
	return annotations
}

// up is v1alpha1 -> v1.
func up(object converter.Object) error {
	var kept map[string]any
	if annotations := annotationsOf(object); annotations != nil {
		if value, ok := annotations[V1Fields]; ok {
			delete(annotations, V1Fields)
			text, isString := value.(string)
			if !isString {
				return fmt.Errorf("annotation %s is not a string", V1Fields)
			}
			decoded, err := converter.Decode([]byte(text))
			if err != nil {
				return fmt.Errorf("annotation %s is not a JSON object: %w", V1Fields, err)
			}
			kept = decoded
		}
		if len(annotations) == 0 {
			delete(object["metadata"].(map[string]any), "annotations")
		}
	}
	spec := specOf(object)
	if spec == nil {
		return nil
	}
	if replicas, ok := spec["replicas"]; ok {
		delete(spec, "replicas")
		spec["instances"] = replicas
	}
	if image, ok := spec["image"]; ok {
		text, isString := image.(string)
		if !isString {
			return fmt.Errorf("spec.image must be a string at v1alpha1, not %s", show(image))
		}
		spec["image"] = SplitImage(text)
	}
	for field, value := range kept {
		spec[field] = value
	}
	return nil
}

// down is v1 -> v1alpha1.
func down(object converter.Object) error {
	kept := map[string]any{}
	if spec := specOf(object); spec != nil {
		if instances, ok := spec["instances"]; ok {
			delete(spec, "instances")
			spec["replicas"] = instances
		}
		if parts, ok := spec["image"]; ok {
			image, err := JoinImage(parts)
			if err != nil {
				return err
			}
			spec["image"] = image
		}
		for _, field := range v1Only {
			if value, ok := spec[field]; ok {
				delete(spec, field)
				kept[field] = value
			}
		}
	}
	if len(kept) == 0 {
		return nil
	}
	metadata, ok := object["metadata"].(map[string]any)
	if !ok {
		if object["metadata"] != nil {
			return errors.New("metadata is not an object")
		}
		metadata = map[string]any{}
		object["metadata"] = metadata
	}
	annotations, ok := metadata["annotations"].(map[string]any)
	if !ok {
		if metadata["annotations"] != nil {
			return errors.New("metadata.annotations is not an object")
		}
		annotations = map[string]any{}
		metadata["annotations"] = annotations
	}
	text, err := converter.Encode(kept)
	if err != nil {
		return err
	}
	annotations[V1Fields] = string(text)
	return nil
}
