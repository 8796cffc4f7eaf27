package build

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseRequirementsAcceptsRequirementsByNameAndRewritesThem(t *testing.T) {
	for _, tc := range []struct{ behaviour, in, want string }{
		{"a bare name", "tinypkg", "tinypkg"},
		{"a pinned version", "tinypkg==1.0", "tinypkg==1.0"},
		{"spaces around the clauses are dropped", "  requests >= 2.0 , < 3 ", "requests>=2.0,<3"},
		{"parenthesised clauses (PEP 508's old form)", "requests (>=2.0,<3)", "requests>=2.0,<3"},
		{"extras", "requests[socks, security]==2.31.0", "requests[socks,security]==2.31.0"},
		{"wildcards, local versions, epochs, compatible and arbitrary equality", "a==1.*,!=1.2+local,~=1.1,>=1!0.5", "a==1.*,!=1.2+local,~=1.1,>=1!0.5"},
		{"arbitrary equality", "a===1.0", "a===1.0"},
		{
			"a marker, in a normal form", `numpy>=1.26; python_version>='3.9' and (sys_platform == "linux" or platform_machine=='x86_64')`,
			`numpy>=1.26 ; python_version >= "3.9" and (sys_platform == "linux" or platform_machine == "x86_64")`,
		},
		{"in and not in", `a; "linux" in sys_platform and os_name not in "nt java"`, `a ; "linux" in sys_platform and os_name not in "nt java"`},
		{"a trailing comment", "tinypkg==1.0  # the pin", "tinypkg==1.0"},
		{"a CRLF line end", "tinypkg\r", "tinypkg"},
		{"names with dots, dashes and underscores", "zope.interface", "zope.interface"},
	} {
		t.Run(tc.behaviour, func(t *testing.T) {
			reqs, err := ParseRequirements([]byte(tc.in))
			require.NoError(t, err)
			require.Len(t, reqs, 1)
			assert.Equal(t, tc.want, reqs[0].String())
		})
	}
	reqs, err := ParseRequirements([]byte("\uFEFF# pinned\n\n a==1\r\n\tb[x]>2 ; extra == 'x'\n#c==1\n"))
	require.NoError(t, err)
	assert.Equal(t, "a==1\nb[x]>2 ; extra == \"x\"\n", string(RenderRequirements(reqs)), "comments, blank lines and a BOM are skipped")
}

// Every attack of issue 22 (and its neighbours) is refused by name, with its line number:
// pip would otherwise read options, files or the service's environment from the job's file.
func TestParseRequirementsRefusesWhatPipWouldReadAsMoreThanARequirement(t *testing.T) {
	for _, tc := range []struct{ attack, in, want string }{
		{"${VAR} expands the service's database URL into the deployment message", "${DATAJOBS_DATABASE_URL}\n", "line 1 is refused: \"${DATAJOBS_DATABASE_URL}\": environment variables"},
		{"$VAR inside a version", "six==$HOME", "environment variables"},
		{`\r smuggles -r /etc/passwd past a filter splitting on \n`, "six\r-r /etc/passwd\r--no-index\n", `line 1 is refused: a carriage return (\r)`},
		{`\r smuggles --no-binary and --find-links (an sdist's build backend runs on the leader)`, "tinypkg\n" + "pkg\r--no-binary=:all:\r--find-links=http://evil.example/\n", "line 2 is refused: a carriage return"},
		{`\v is a line break to pip`, "six\v-r /etc/passwd", "U+000B, which pip reads as a line break"},
		{`\f is a line break to pip`, "six\f-r /etc/passwd", "U+000C, which pip reads as a line break"},
		{`\x1c is a line break to pip`, "six\x1c-r /etc/passwd", "U+001C, which pip reads as a line break"},
		{`\x1d is a line break to pip`, "six\x1d-r /etc/passwd", "U+001D, which pip reads as a line break"},
		{`\x1e is a line break to pip`, "six\x1e-r /etc/passwd", "U+001E, which pip reads as a line break"},
		{`\x85 (NEL) is a line break to pip`, "six\u0085-r /etc/passwd", "U+0085, which pip reads as a line break"},
		{`U+2028 is a line break to pip`, "six\u2028-r /etc/passwd", "U+2028, which pip reads as a line break"},
		{`U+2029 is a line break to pip`, "six\u2029-r /etc/passwd", "U+2029, which pip reads as a line break"},
		{"a line break hidden in a comment", "six # note\r--no-index", "a carriage return"},
		{"a NUL byte", "six\x00", "the control character U+0000"},
		{"an escape sequence (terminal injection into logs)", "six\x1b[2J", "the control character U+001B"},
		{"-r reads any file of the host", "-r /etc/passwd", "line 1 is refused: \"-r /etc/passwd\": pip options"},
		{"-c reads any file of the host", "-c /var/run/secrets/kubernetes.io/serviceaccount/token", "pip options"},
		{"--index-url points the service's pip elsewhere", "tinypkg\n--index-url http://evil.example/simple", "line 2 is refused: \"--index-url http://evil.example/simple\": pip options"},
		{"--no-binary lets an sdist's build backend run", "--no-binary=:all:", "pip options"},
		{"-e installs an editable (code run at install)", "-e git+https://evil.example/x.git", "pip options"},
		{"an option after a requirement", "six --install-option=--prefix=/tmp", "pip options"},
		{"--hash after a requirement", "six==1.16 --hash=sha256:abc", "pip options"},
		{"a backslash continues a line in pip", "six \\\n--no-index", `a backslash (pip's line continuation)`},
		{"a direct URL reference", "tinypkg @ file:///etc/passwd", "direct references"},
		{"a bare URL", "https://evil.example/pkg.whl", "direct references"},
		{"a wheel path", "./dist/pkg-1.0-py3-none-any.whl", "paths are not allowed"},
		{"an absolute path", "/etc/passwd", "paths are not allowed"},
		{"a marker string with a quote breaking out", `six; os_name == "a" or "b"=="b`, "not closed"},
		{"a marker string with a #", `six; os_name == "a#b"`, "only letters, digits"},
		{"an unknown marker variable", `six; os.system == "x"`, "a marker variable"},
		{"a name that is not PEP 508", "-six", "pip options"},
		{"a name ending in a dash", "six-", "must start and end with a letter or digit"},
		{"a non-ASCII name", "sïx", "unexpected 'ï'"},
		{"a version with spaces inside", "six==1 0", "unexpected '0'"},
		{"invalid UTF-8", "six\xff", "not UTF-8"},
		{"an over-long line", strings.Repeat("a", 1001), "longer than 1000 bytes"},
		{"too many requirements", strings.Repeat("a\n", 1001), "more than 1000 requirements"},
		{"deeply nested parentheses", "a;" + strings.Repeat("(", 20) + "os_name=='x'" + strings.Repeat(")", 20), "more than 10 deep"},
		{"an oversized file", strings.Repeat("#", 65<<10), "larger than 65536 bytes"},
	} {
		t.Run(tc.attack, func(t *testing.T) {
			_, err := ParseRequirements([]byte(tc.in))
			require.Error(t, err)
			assert.True(t, IsUserError(err), "a user error, not retried: %v", err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// pipLineBreaks are the separators of Python's str.splitlines, which pip's requirement
// file reader uses.
var pipLineBreaks = []string{"\r\n", "\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\u0085", "\u2028", "\u2029"}

// FuzzParseRequirements: whatever a job writes, what reaches pip is one plain requirement
// a line, that reads back to the same requirements, with no option, URL, path, variable,
// continuation, control character or line break other than \n.
func FuzzParseRequirements(f *testing.F) {
	for _, seed := range []string{
		"tinypkg==1.0\n", "requests[socks]>=2,<3 ; python_version >= '3.8'\n", "six\r-r /etc/passwd",
		"${DATAJOBS_DATABASE_URL}", "a; (os_name == 'x' or extra == 'y') and python_version < \"3\"",
		"pkg\u2028--no-binary=:all:", "a (==1.0) # c\r\nb\n", "x;os_name not in 'nt'",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		reqs, err := ParseRequirements(data)
		if err != nil {
			if !IsUserError(err) {
				t.Fatalf("a refusal must be a user error: %v", err)
			}
			return
		}
		out := RenderRequirements(reqs)
		for _, sep := range pipLineBreaks {
			if bytes.Contains(out, []byte(sep)) {
				t.Fatalf("rendered file holds the line break %q: %q", sep, out)
			}
		}
		for _, c := range out {
			if c != '\n' && (c < 0x20 || c > 0x7e) {
				t.Fatalf("rendered file holds byte %#x: %q", c, out)
			}
		}
		for _, bad := range []string{"$", `\`, "://", "@", "#", "/", "'"} {
			if bytes.Contains(out, []byte(bad)) {
				t.Fatalf("rendered file holds %q: %q", bad, out)
			}
		}
		lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
		if len(reqs) == 0 {
			lines = nil
		}
		if len(lines) != len(reqs) {
			t.Fatalf("%d requirements rendered as %d lines", len(reqs), len(lines))
		}
		for _, l := range lines {
			if strings.HasPrefix(l, "-") || strings.TrimSpace(l) != l || l == "" {
				t.Fatalf("rendered line %q could be read as an option or a blank", l)
			}
		}
		again, err := ParseRequirements(out)
		if err != nil {
			t.Fatalf("the rendered file does not parse: %v\n%q", err, out)
		}
		if !bytes.Equal(RenderRequirements(again), out) {
			t.Fatalf("rendering is not stable:\n%q\n%q", out, RenderRequirements(again))
		}
	})
}

// pip reads the file the builder writes as the requirements the job wrote: for lines both
// accept, pip's own parser (its vendored packaging) gives the same name, extras, version
// specifiers and marker for the job's line and for the rewritten one.
func TestPipReadsTheRewrittenRequirementsAsTheJobWroteThem(t *testing.T) {
	lines := []string{
		`numpy>=1.21; python_version<"3.11"`, "apache-airflow[postgres,google]==2.7.0", "pandas~=2.0",
		"SQLAlchemy<2.0,>=1.4", "zope.interface (>=5)", "a===1.0", "b==1.*,!=1.2+local",
		`requests ; platform_system != 'Windows' and (python_version >= '3.8' or implementation_name == 'pypy')`,
		`foo; extra == 'x' or extra == 'y' and os_name == 'posix'`, `c; "linux" in sys_platform and os_name not in "nt java"`,
		`d; (python_version < "3" or (os_name == "nt" and extra == "z")) and platform_machine == "x86_64"`,
	}
	var pairs []string
	for _, l := range lines {
		reqs, err := ParseRequirements([]byte(l))
		require.NoError(t, err, l)
		pairs = append(pairs, l, reqs[0].String())
	}
	var c PipConfig
	cmdline, err := c.pipCommand(t.Context())
	require.NoError(t, err)
	script := `import sys, json
from pip._vendor.packaging.requirements import Requirement
from pip._vendor.packaging.markers import default_environment
pairs = json.load(sys.stdin)
envs = [dict(default_environment(), extra=e, os_name=o, sys_platform=p, python_version=v, platform_machine=m, platform_system=s, implementation_name=i)
        for e in ("", "x", "y", "z") for o in ("posix", "nt") for p in ("linux", "win32") for v in ("2.7", "3.9", "3.12")
        for m in ("x86_64", "aarch64") for s in ("Linux", "Windows") for i in ("cpython", "pypy")]
for a, b in zip(pairs[::2], pairs[1::2]):
    ra, rb = Requirement(a), Requirement(b)
    ev = lambda r: [r.marker is None or r.marker.evaluate(e) for e in envs]
    if (ra.name, ra.extras, ra.specifier, ev(ra)) != (rb.name, rb.extras, rb.specifier, ev(rb)):
        print("differs:", a, "|", b)
`
	in, err := json.Marshal(pairs)
	require.NoError(t, err)
	cmd := exec.CommandContext(t.Context(), cmdline[0], "-c", script)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Empty(t, string(out))
}
