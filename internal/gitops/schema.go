package gitops

import (
	"encoding/json"
	"reflect"
	"strings"
)

// SchemaID is where the service publishes the file's JSON Schema.
const SchemaID = "/data-jobs/schema/datajobs.yaml.json"

// Schema is the JSON Schema (draft 2020-12) of the file, generated from File's Go types,
// the same the parser decodes into: objects refuse unknown properties, as Parse does; a
// field is required when its tag says jsonschema:"required".
func Schema() []byte {
	s := schemaOf(reflect.TypeFor[File]())
	s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	s["$id"] = SchemaID
	s["title"] = "datajobs.yaml"
	props := s["properties"].(map[string]any)
	props["apiVersion"] = map[string]any{"const": APIVersion}
	// A trigger is the trigger package's Spec, which carries no schema tags: its POST's
	// required fields.
	props["triggers"].(map[string]any)["items"].(map[string]any)["required"] = []string{"name", "target", "on"}
	// A deployment names its version, or the folder the CLI packs and stages for it (the
	// CLI sends both: the folder's version beside it).
	jobProps := props["jobs"].(map[string]any)["items"].(map[string]any)["properties"].(map[string]any)
	jobProps["deployment"].(map[string]any)["anyOf"] = []any{
		map[string]any{"required": []string{"job_version"}}, map[string]any{"required": []string{"source"}},
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		panic("encode the datajobs.yaml schema: " + err.Error()) // maps of plain values always encode
	}
	return append(b, '\n')
}

var rawMessage = reflect.TypeFor[json.RawMessage]()

// schemaOf is the schema of values of t as encoding/json reads them.
func schemaOf(t reflect.Type) map[string]any {
	if t == rawMessage {
		return map[string]any{} // any JSON value
	}
	switch t.Kind() {
	case reflect.Pointer:
		return schemaOf(t.Elem())
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int32, reflect.Int64:
		return map[string]any{"type": "integer"}
	case reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": schemaOf(t.Elem())}
	case reflect.Struct:
		props, required := map[string]any{}, []string{}
		addFields(t, props, &required)
		s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
		if len(required) > 0 {
			s["required"] = required
		}
		return s
	}
	panic("no JSON Schema for a field of kind " + t.Kind().String()) // a new field's type: add it above
}

// addFields adds the properties of t's fields, those of embedded structs inlined.
func addFields(t reflect.Type, props map[string]any, required *[]string) {
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		switch {
		case name == "-" || !f.IsExported():
			continue
		case f.Anonymous && name == "":
			addFields(f.Type, props, required)
			continue
		case name == "":
			name = f.Name
		}
		props[name] = schemaOf(f.Type)
		if f.Tag.Get("jsonschema") == "required" {
			*required = append(*required, name)
		}
	}
}
