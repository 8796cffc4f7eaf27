package deploytest

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	yamlv3 "go.yaml.in/yaml/v3"

	"github.com/datajobs/datajobs/internal/cli"
)

var update = flag.Bool("update", false, "rewrite the chart's README tables and the config part of values.schema.json")

// dedicated are the serve flags the chart sets from values of their own (not config), and
// where.
var dedicated = map[string]string{
	"admin-listen":                 "`adminService.targetPort` (on the pod IP)",
	"admin-teams":                  "`auth.adminTeams`",
	"auth-mode":                    "`auth.mode`",
	"base-image":                   "`builder.baseImages`",
	"database-url":                 "`database.existingSecret`, `database.secretKey`",
	"image-registry":               "`builder.imageRegistry`",
	"job-api-url":                  "`jobPods.apiURL`",
	"job-service-account":          "`jobPods.serviceAccountName`",
	"job-service-account-template": "`jobPods.serviceAccountTemplate`",
	"kubeconfig":                   "the in-cluster config (`extraEnv` to override)",
	"listen":                       "`service.targetPort`",
	"log-format":                   "`logFormat`",
	"log-level":                    "`logLevel`",
	"namespace":                    "`jobsNamespace`",
	"oidc-audience":                "`auth.oidc.audience`",
	"oidc-issuer-url":              "`auth.oidc.issuerURLs`",
	"oidc-teams-claim":             "`auth.oidc.teamsClaim`",
	"oidc-username-claim":          "`auth.oidc.usernameClaim`",
	"registry-auth-file":           "`builder.registryCredentials.existingSecret`",
	"secrets-key-file":             "`secrets.existingSecret`, `secrets.secretKey`",
}

// flagSchema is the JSON schema of a config value for a flag of that pflag type.
func flagSchema(f cli.EnvFlag) map[string]any {
	s := map[string]any{"description": fmt.Sprintf("--%s: %s (default %s)", f.Name, f.Usage, defaultText(f))}
	switch f.Type {
	case "int", "int32", "int64":
		s["type"] = "integer"
	case "float64":
		s["type"] = "number"
	case "bool":
		s["type"] = "boolean"
	case "stringSlice":
		s["type"] = []any{"array", "string"}
		s["items"] = map[string]any{"type": "string"}
	case "auto|number":
		s["type"] = []any{"string", "number"}
		s["pattern"] = "^(auto|-?[0-9.]+)$"
	default: // string, duration
		s["type"] = "string"
	}
	return s
}

func defaultText(f cli.EnvFlag) string {
	if f.Default == "" || f.Default == "[]" {
		return "none"
	}
	return f.Default
}

// sampleValue is a value of the flag's type, for rendering.
func sampleValue(f cli.EnvFlag) any {
	switch f.Type {
	case "int", "int32", "int64":
		n, _ := strconv.Atoi(f.Default)
		return n
	case "float64":
		v, _ := strconv.ParseFloat(f.Default, 64)
		return v
	case "bool":
		return f.Default == "true"
	case "stringSlice":
		return []any{"a", "b"}
	case "auto|number":
		return "auto"
	default:
		return "x"
	}
}

// valueDoc is one documented key of values.yaml.
type valueDoc struct{ key, typ, def, desc string }

// valueDocs walks values.yaml: a key with a "# --" comment is documented as a whole (its
// value is the default); a mapping without one is walked into; any other key is an error.
func valueDocs(t *testing.T) []valueDoc {
	t.Helper()
	b, err := os.ReadFile(chartDir + "/values.yaml")
	require.NoError(t, err)
	var doc yamlv3.Node
	require.NoError(t, yamlv3.Unmarshal(b, &doc))
	var out []valueDoc
	var walk func(prefix string, n *yamlv3.Node)
	walk = func(prefix string, n *yamlv3.Node) {
		for i := 0; i < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			key := prefix + k.Value
			comment := k.HeadComment
			if at := strings.LastIndex(comment, "# --"); at >= 0 {
				var lines []string
				for _, l := range strings.Split(comment[at+len("# --"):], "\n") {
					lines = append(lines, strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "#")))
				}
				var val any
				require.NoError(t, v.Decode(&val))
				def, err := json.Marshal(val)
				require.NoError(t, err)
				out = append(out, valueDoc{key: key, typ: yamlType(v), def: string(def), desc: strings.TrimSpace(strings.Join(lines, " "))})
				continue
			}
			require.Equal(t, yamlv3.MappingNode, v.Kind, "values.yaml: %s has no \"# --\" comment", key)
			walk(key+".", v)
		}
	}
	walk("", doc.Content[0])
	return out
}

func yamlType(n *yamlv3.Node) string {
	switch {
	case n.Kind == yamlv3.MappingNode:
		return "object"
	case n.Kind == yamlv3.SequenceNode:
		return "list"
	case n.Tag == "!!int":
		return "int"
	case n.Tag == "!!bool":
		return "bool"
	case n.Tag == "!!float":
		return "float"
	default:
		return "string"
	}
}

// readmeTables are the generated parts of the chart's README.
func readmeTables(t *testing.T) map[string]string {
	var values bytes.Buffer
	values.WriteString("| Key | Type | Default | Description |\n|-----|------|---------|-------------|\n")
	for _, d := range valueDocs(t) {
		fmt.Fprintf(&values, "| `%s` | %s | `%s` | %s |\n", d.key, d.typ, strings.ReplaceAll(d.def, "|", `\|`), strings.ReplaceAll(d.desc, "|", `\|`))
	}
	var flags bytes.Buffer
	flags.WriteString("| Flag | Environment variable | Set with | Default |\n|------|----------------------|----------|---------|\n")
	for _, f := range cli.ServeEnv() {
		where := dedicated[f.Name]
		if where == "" {
			where = "`config." + f.Name + "` or `secretConfig." + f.Name + "`"
		}
		fmt.Fprintf(&flags, "| `--%s` | `%s` | %s | `%s` |\n", f.Name, f.Env, where, defaultText(f))
	}
	return map[string]string{"values": values.String(), "flags": flags.String()}
}

// The chart's README tables are generated from values.yaml (every key documented with a
// "# --" comment) and from the flags of `datajobs serve`; values.schema.json's config
// properties are generated from the same flags, so that a new flag cannot be forgotten:
// `go test ./deploy/deploytest -run TestChartReadmeAndSchema -update` rewrites them.
func TestChartReadmeAndSchemaAreGenerated(t *testing.T) {
	readme, err := os.ReadFile(chartDir + "/README.md")
	require.NoError(t, err)
	text := string(readme)
	for name, table := range readmeTables(t) {
		begin, end := "<!-- "+name+":begin (generated) -->\n", "<!-- "+name+":end -->"
		i, j := strings.Index(text, begin), strings.Index(text, end)
		require.True(t, i >= 0 && j > i, "README.md lacks the markers %q and %q", begin, end)
		text = text[:i+len(begin)] + table + text[j:]
	}

	raw, err := os.ReadFile(chartDir + "/values.schema.json")
	require.NoError(t, err)
	var schema map[string]any
	require.NoError(t, json.Unmarshal(raw, &schema))
	props := map[string]any{}
	for _, f := range cli.ServeEnv() {
		if _, own := dedicated[f.Name]; !own {
			props[f.Name] = flagSchema(f)
		}
	}
	config := schema["properties"].(map[string]any)["config"].(map[string]any)
	config["properties"] = props
	config["additionalProperties"] = false
	secretProps := map[string]any{}
	for name := range props {
		secretProps[name] = map[string]any{"$ref": "#/definitions/secretKeyRef"}
	}
	secret := schema["properties"].(map[string]any)["secretConfig"].(map[string]any)
	secret["properties"] = secretProps
	secret["additionalProperties"] = false
	schema["definitions"] = map[string]any{"secretKeyRef": map[string]any{
		"type": "object", "additionalProperties": false, "required": []any{"name", "key"},
		"properties": map[string]any{"name": map[string]any{"type": "string", "minLength": 1}, "key": map[string]any{"type": "string", "minLength": 1}},
	}}
	gen, err := json.MarshalIndent(schema, "", "  ")
	require.NoError(t, err)
	gen = append(gen, '\n')

	for _, f := range cli.ServeEnv() {
		if _, ok := dedicated[f.Name]; ok {
			require.NotContains(t, props, f.Name)
		}
	}
	for name := range dedicated {
		require.True(t, slices.ContainsFunc(cli.ServeEnv(), func(f cli.EnvFlag) bool { return f.Name == name }), "serve has no flag --%s", name)
	}
	if *update {
		require.NoError(t, os.WriteFile(chartDir+"/README.md", []byte(text), 0o644))
		require.NoError(t, os.WriteFile(chartDir+"/values.schema.json", gen, 0o644))
		return
	}
	require.Equal(t, text, string(readme), "README.md is stale: go test ./deploy/deploytest -run TestChartReadmeAndSchema -update")
	require.JSONEq(t, string(gen), string(raw), "values.schema.json is stale: go test ./deploy/deploytest -run TestChartReadmeAndSchema -update")
}
