// Package docs_test keeps the documentation's flags true: the README and docs/ named flags
// that serve did not have (and the README's table lacked flags serve has), and a user who
// copies a flag from the documentation gets "unknown flag".
package docs_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/cli"
)

// commands are datajobs' commands whose flags the documentation names.
var commands = []string{"serve", "dev", "sync", "import", "release", "migrate", "apply", "export"}

// foreign are flags of other programs the documentation names, by program: they are no
// flags of datajobs. A flag in neither list fails the test.
var foreign = map[string][]string{
	"vdkcli":                   {"all", "arguments", "cancel", "cloud", "delete", "delete-all-job-properties", "disable", "enable", "get", "job-version", "list", "local", "logs", "remove", "rest-api-url", "set", "show", "start", "update", "vdk-version", "yes"},
	"kubectl":                  {"force", "from", "from-file", "from-literal"},
	"helm":                     {"set"},
	"pip":                      {"extra-index-url", "find-links", "hash", "index-url", "isolated", "no-binary", "no-build-isolation", "no-compile", "only-binary", "target"},
	"pip-compile":              {"generate-hashes"},
	"kube-apiserver":           {"authorization-mode", "endpoint-reconciler-type", "kube-api-burst", "kube-api-qps", "kubelet-certificate-authority", "kubelet-preferred-address-types"},
	"kube-controller-manager":  {"concurrent-cron-job-syncs", "flex-volume-plugin-dir"},
	"kubelet":                  {"hostname-override", "node-ip"},
	"hack/base-image/build.sh": {"refresh"},
	"postgres, etcd":           {"bindir", "no-sync", "unsafe-no-fsync"},
	"hydra":                    {"dev"},
	"go test":                  {"count", "race", "run"},
	"hack/image":               {"base"},
}

// helpFlag is a flag line of cobra's help: "  -x, --name type   usage" or "      --name ...".
var helpFlag = regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z0-9][a-z0-9-]*)`)

// helpFlags runs `datajobs <command> --help` and returns the flags it lists (the global
// ones included).
func helpFlags(t *testing.T, command string) []string {
	t.Helper()
	var out, errOut bytes.Buffer
	code := cli.Execute(context.Background(), []string{command, "--help"}, &out, &errOut)
	require.Zero(t, code, "datajobs %s --help: %s", command, errOut.String())
	var flags []string
	for _, m := range helpFlag.FindAllStringSubmatch(out.String(), -1) {
		if m[1] != "help" {
			flags = append(flags, m[1])
		}
	}
	require.NotEmpty(t, flags, "datajobs %s --help lists no flags:\n%s", command, out.String())
	return flags
}

var (
	codeSpan = regexp.MustCompile("`([^`\n]+)`")
	docFlag  = regexp.MustCompile(`(?:^|[\s(=\[/])--([a-z][a-z0-9-]*[a-z0-9])`)
)

// documented returns the flags named in code spans of the markdown file, each with a line.
func documented(t *testing.T, path string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	out := map[string]int{}
	for i, line := range strings.Split(string(b), "\n") {
		for _, span := range codeSpan.FindAllStringSubmatch(line, -1) {
			for _, m := range docFlag.FindAllStringSubmatch(span[1], -1) {
				if _, ok := out[m[1]]; !ok {
					out[m[1]] = i + 1
				}
			}
		}
	}
	return out
}

func TestEveryFlagTheDocsNameIsAFlagOfDatajobs(t *testing.T) {
	known := map[string]bool{}
	for _, c := range commands {
		for _, f := range helpFlags(t, c) {
			known[f] = true
		}
	}
	for _, flags := range foreign {
		for _, f := range flags {
			known[f] = true
		}
	}
	files, err := filepath.Glob("*.md")
	require.NoError(t, err)
	files = append(files, "../README.md")
	for _, file := range files {
		for flag, line := range documented(t, file) {
			if !known[flag] {
				t.Errorf("%s:%d names --%s, which no datajobs command has (datajobs %s --help); fix the text, or list it in foreign if it is another program's",
					file, line, flag, strings.Join(commands, "/"))
			}
		}
	}
}

// The README's configuration table is the reference of serve's flags: every flag of
// `datajobs serve --help` is in it, and it names no other.
func TestTheReadmeTableListsExactlyTheFlagsOfServe(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	var table []string
	in := false
	for line := range strings.SplitSeq(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "| flag | default |"):
			in = true
		case in && !strings.HasPrefix(line, "|"):
			in = false
		case in:
			for _, span := range codeSpan.FindAllStringSubmatch(strings.Split(line, "|")[1], -1) {
				for _, m := range docFlag.FindAllStringSubmatch(span[1], -1) {
					table = append(table, m[1])
				}
			}
		}
	}
	require.NotEmpty(t, table, "the README has its table of serve's flags (a header \"| flag | default |\")")
	serve := helpFlags(t, "serve")
	for _, f := range serve {
		if !slices.Contains(table, f) {
			t.Errorf("datajobs serve --%s is not in the README's configuration table", f)
		}
	}
	for _, f := range table {
		if !slices.Contains(serve, f) {
			t.Errorf("the README's configuration table names --%s, which datajobs serve --help does not list", f)
		}
	}
}
