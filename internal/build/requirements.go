package build

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A job's requirements.txt is untrusted input read by the service's own pip, on the
// synchronizer leader. pip's file format is much more than a list of packages: options
// (-r, --index-url, --no-binary …), URLs and paths, `${VAR}` expanded from pip's
// environment, `\` line continuations, and line breaks at \r, \v, \f, \x1c–\x1e, \x85,
// U+2028 and U+2029 as well as \n. So the builder parses the file itself, with the
// grammar of a PEP 508 requirement by name (name, extras, version specifiers,
// environment marker) and nothing else, and gives pip a file written from the parsed
// form: pip never reads a byte the job wrote.

// Bounds of requirements.txt.
const (
	maxRequirementsBytes = 64 << 10
	maxRequirements      = 1000
	maxRequirementLine   = 1000
)

// Requirement is one requirement by name (PEP 508, without the URL form).
type Requirement struct {
	Name       string
	Extras     []string
	Specifiers []Specifier
	// Marker is the environment marker, "" when none; it prints in a normal form.
	Marker *Marker
}

// Specifier is one version clause, such as ">=" "1.2".
type Specifier struct {
	Op, Version string
}

// Marker is an environment marker expression: a comparison (Left Op Right) or, when
// Op is "and" or "or", a combination of Sub.
type Marker struct {
	Op          string
	Left, Right string // a marker variable or a quoted string, as printed
	Sub         []*Marker
}

// String prints r the way the builder hands it to pip.
func (r Requirement) String() string {
	var b strings.Builder
	b.WriteString(r.Name)
	if len(r.Extras) > 0 {
		b.WriteString("[" + strings.Join(r.Extras, ",") + "]")
	}
	for i, s := range r.Specifiers {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(s.Op + s.Version)
	}
	if r.Marker != nil {
		b.WriteString(" ; " + r.Marker.String())
	}
	return b.String()
}

func (m *Marker) String() string {
	if m.Op != "and" && m.Op != "or" {
		return m.Left + " " + m.Op + " " + m.Right
	}
	parts := make([]string, len(m.Sub))
	for i, s := range m.Sub {
		parts[i] = s.String()
		if s.Op == "or" && m.Op == "and" { // "and" binds tighter
			parts[i] = "(" + parts[i] + ")"
		}
	}
	return strings.Join(parts, " "+m.Op+" ")
}

// RenderRequirements writes requirements as a file for pip, one a line.
func RenderRequirements(reqs []Requirement) []byte {
	var b strings.Builder
	for _, r := range reqs {
		b.WriteString(r.String() + "\n")
	}
	return []byte(b.String())
}

// ParseRequirements parses a job's requirements.txt. Blank lines and comments (from a #
// at the start of a line or after a space) are skipped; a line may end in \r\n. Anything
// else that is not a requirement by name is a *UserError naming the line and what it
// refuses.
func ParseRequirements(data []byte) ([]Requirement, error) {
	if len(data) > maxRequirementsBytes {
		return nil, userErrorf("requirements.txt is larger than %d bytes; list only the job's direct requirements", maxRequirementsBytes)
	}
	if !utf8.Valid(data) {
		return nil, userErrorf("requirements.txt is not UTF-8 text")
	}
	text := strings.TrimPrefix(string(data), "\uFEFF")
	var reqs []Requirement
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		line = strings.TrimSuffix(line, "\r")
		if len(line) > maxRequirementLine {
			return nil, refused(n, fmt.Sprintf("a line longer than %d bytes", maxRequirementLine))
		}
		if what := forbiddenRune(line); what != "" {
			return nil, refused(n, what)
		}
		line = strings.Trim(stripComment(line), " \t")
		if line == "" {
			continue
		}
		if what := forbiddenForm(line); what != "" {
			return nil, refused(n, what)
		}
		r, err := parseRequirement(line)
		if err != nil {
			return nil, refused(n, fmt.Sprintf("%q: it is not a requirement by name (PEP 508: name, [extras], version specifiers, ; marker): %v", line, err))
		}
		if len(reqs) == maxRequirements {
			return nil, refused(n, fmt.Sprintf("more than %d requirements", maxRequirements))
		}
		reqs = append(reqs, r)
	}
	return reqs, nil
}

func refused(line int, what string) error {
	return userErrorf("requirements.txt line %d is refused: %s", line, what)
}

// forbiddenRune names the first character of line that pip would read as a line break
// or that is a control character, or returns "". A tab is allowed.
func forbiddenRune(line string) string {
	for _, r := range line {
		switch {
		case r == '\r':
			return `a carriage return (\r) inside a line, which pip reads as a line break`
		case r == '\u2028' || r == '\u2029' || r == '\x85' || (r >= '\x1c' && r <= '\x1e') || r == '\v' || r == '\f':
			return fmt.Sprintf("the character %U, which pip reads as a line break", r)
		case r != '\t' && (unicode.IsControl(r) || r == '\uFEFF'):
			return fmt.Sprintf("the control character %U", r)
		}
	}
	return ""
}

// stripComment cuts a comment the way pip does: from a # at the start or after a space.
func stripComment(line string) string {
	for i := 0; i < len(line); i++ {
		if line[i] == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t') {
			return line[:i]
		}
	}
	return line
}

// forbiddenForm names what a line is when it is one of pip's other forms, with the
// reason it is refused, or returns "".
func forbiddenForm(line string) string {
	switch {
	case strings.HasPrefix(line, "-") || strings.Contains(line, " -") || strings.Contains(line, "\t-"):
		return fmt.Sprintf("%q: pip options are not allowed (-r, -c, -e, --index-url, --no-binary …); the service's configuration names the package indexes", line)
	case strings.Contains(line, "$"):
		return fmt.Sprintf("%q: environment variables ($) are not allowed; pip would read them from the service's environment", line)
	case strings.Contains(line, `\`):
		return fmt.Sprintf("%q: a backslash (pip's line continuation) is not allowed", line)
	case strings.Contains(line, "://") || strings.Contains(line, "@"):
		return fmt.Sprintf("%q: direct references (URLs, name @ url) are not allowed; name a package from the index", line)
	case strings.HasPrefix(line, ".") || strings.Contains(line, "/"):
		return fmt.Sprintf("%q: paths are not allowed; name a package from the index", line)
	}
	return ""
}

// markerVariables are PEP 508's environment marker variables.
var markerVariables = map[string]bool{
	"python_version": true, "python_full_version": true, "os_name": true, "sys_platform": true,
	"platform_release": true, "platform_system": true, "platform_version": true,
	"platform_machine": true, "platform_python_implementation": true,
	"implementation_name": true, "implementation_version": true, "extra": true,
}

// reqParser is a recursive-descent parser of one requirement line.
type reqParser struct {
	s   string
	pos int
}

func parseRequirement(line string) (Requirement, error) {
	p := &reqParser{s: line}
	var r Requirement
	var err error
	if r.Name, err = p.identifier("a package name"); err != nil {
		return r, err
	}
	if p.skip(); p.peek("[") {
		if r.Extras, err = p.extras(); err != nil {
			return r, err
		}
	}
	if r.Specifiers, err = p.versionSpec(); err != nil {
		return r, err
	}
	if p.skip(); p.peek(";") {
		p.pos++
		if r.Marker, err = p.markerOr(0); err != nil {
			return r, err
		}
	}
	if p.skip(); p.pos < len(p.s) {
		return r, p.unexpected()
	}
	return r, nil
}

func (p *reqParser) skip() {
	for p.pos < len(p.s) && (p.s[p.pos] == ' ' || p.s[p.pos] == '\t') {
		p.pos++
	}
}

func (p *reqParser) peek(tok string) bool { return strings.HasPrefix(p.s[p.pos:], tok) }

func (p *reqParser) unexpected() error {
	if p.pos >= len(p.s) {
		return fmt.Errorf("it ends too early")
	}
	r, _ := utf8.DecodeRuneInString(p.s[p.pos:])
	return fmt.Errorf("unexpected %q at column %d", r, p.pos+1)
}

func alnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// identifier reads a PEP 508 name: letters and digits, with - _ . inside.
func (p *reqParser) identifier(what string) (string, error) {
	p.skip()
	start := p.pos
	for p.pos < len(p.s) && (alnum(p.s[p.pos]) || strings.IndexByte("-_.", p.s[p.pos]) >= 0) {
		p.pos++
	}
	id := p.s[start:p.pos]
	if id == "" {
		return "", fmt.Errorf("%s is missing: %w", what, p.unexpected())
	}
	if !alnum(id[0]) || !alnum(id[len(id)-1]) {
		return "", fmt.Errorf("%s %q must start and end with a letter or digit", what, id)
	}
	return id, nil
}

func (p *reqParser) extras() ([]string, error) {
	p.pos++ // [
	var extras []string
	for {
		if p.skip(); p.peek("]") && len(extras) == 0 {
			p.pos++
			return extras, nil
		}
		e, err := p.identifier("an extra")
		if err != nil {
			return nil, err
		}
		extras = append(extras, e)
		p.skip()
		switch {
		case p.peek(","):
			p.pos++
		case p.peek("]"):
			p.pos++
			return extras, nil
		default:
			return nil, p.unexpected()
		}
	}
}

// versionOps are PEP 440's comparison operators, longest first.
var versionOps = []string{"===", "==", "!=", "<=", ">=", "~=", "<", ">"}

func (p *reqParser) op(ops []string) string {
	for _, op := range ops {
		if p.peek(op) {
			p.pos += len(op)
			return op
		}
	}
	return ""
}

// versionSpec reads comma-separated version clauses, optionally in parentheses.
func (p *reqParser) versionSpec() ([]Specifier, error) {
	p.skip()
	paren := p.peek("(")
	if paren {
		p.pos++
		p.skip()
	}
	var specs []Specifier
	for {
		op := p.op(versionOps)
		if op == "" {
			if len(specs) > 0 || paren {
				return nil, fmt.Errorf("a version comparison (==, >=, ~= …) is missing: %w", p.unexpected())
			}
			return nil, nil
		}
		p.skip()
		start := p.pos
		for p.pos < len(p.s) && (alnum(p.s[p.pos]) || strings.IndexByte("-_.*+!", p.s[p.pos]) >= 0) {
			p.pos++
		}
		if p.pos == start || !alnum(p.s[start]) {
			return nil, fmt.Errorf("a version is missing after %s: %w", op, p.unexpected())
		}
		specs = append(specs, Specifier{Op: op, Version: p.s[start:p.pos]})
		if p.skip(); p.peek(",") {
			p.pos++
			p.skip()
			continue
		}
		if paren {
			if !p.peek(")") {
				return nil, p.unexpected()
			}
			p.pos++
		}
		return specs, nil
	}
}

// maxMarkerDepth bounds the nesting of parentheses in a marker.
const maxMarkerDepth = 10

func (p *reqParser) keyword(kw string) bool {
	p.skip()
	if !p.peek(kw) {
		return false
	}
	end := p.pos + len(kw)
	if end < len(p.s) && (alnum(p.s[end]) || p.s[end] == '_') {
		return false
	}
	p.pos = end
	return true
}

func (p *reqParser) markerOr(depth int) (*Marker, error) {
	return p.markerList("or", depth, func() (*Marker, error) {
		return p.markerList("and", depth, func() (*Marker, error) { return p.markerExpr(depth) })
	})
}

// markerList reads one or more next()s joined by the keyword op.
func (p *reqParser) markerList(op string, depth int, next func() (*Marker, error)) (*Marker, error) {
	first, err := next()
	if err != nil {
		return nil, err
	}
	m := &Marker{Op: op, Sub: []*Marker{first}}
	for p.keyword(op) {
		sub, err := next()
		if err != nil {
			return nil, err
		}
		m.Sub = append(m.Sub, sub)
	}
	if len(m.Sub) == 1 {
		return first, nil
	}
	return m, nil
}

func (p *reqParser) markerExpr(depth int) (*Marker, error) {
	if p.skip(); p.peek("(") {
		if depth == maxMarkerDepth {
			return nil, fmt.Errorf("the marker nests parentheses more than %d deep", maxMarkerDepth)
		}
		p.pos++
		m, err := p.markerOr(depth + 1)
		if err != nil {
			return nil, err
		}
		if p.skip(); !p.peek(")") {
			return nil, p.unexpected()
		}
		p.pos++
		return m, nil
	}
	left, err := p.markerValue()
	if err != nil {
		return nil, err
	}
	p.skip()
	op := p.op(versionOps)
	switch {
	case op != "":
	case p.keyword("in"):
		op = "in"
	case p.keyword("not"):
		if !p.keyword("in") {
			return nil, fmt.Errorf("'not' must be followed by 'in': %w", p.unexpected())
		}
		op = "not in"
	default:
		return nil, fmt.Errorf("a marker comparison (==, in …) is missing: %w", p.unexpected())
	}
	right, err := p.markerValue()
	if err != nil {
		return nil, err
	}
	return &Marker{Op: op, Left: left, Right: right}, nil
}

// markerValue reads a marker variable or a quoted string of letters, digits, spaces and
// ._-+*! (enough for versions and platform names; no quote, #, $ or \ can get through).
func (p *reqParser) markerValue() (string, error) {
	p.skip()
	if p.pos < len(p.s) && (p.s[p.pos] == '"' || p.s[p.pos] == '\'') {
		quote := p.s[p.pos]
		end := strings.IndexByte(p.s[p.pos+1:], quote)
		if end < 0 {
			return "", fmt.Errorf("a quoted string is not closed")
		}
		value := p.s[p.pos+1 : p.pos+1+end]
		for i := 0; i < len(value); i++ {
			if c := value[i]; !alnum(c) && strings.IndexByte(" ._-+*!", c) < 0 {
				return "", fmt.Errorf("the marker string %q holds %q: only letters, digits, spaces and ._-+*! are allowed", value, c)
			}
		}
		p.pos += end + 2
		return `"` + value + `"`, nil
	}
	start := p.pos
	for p.pos < len(p.s) && (alnum(p.s[p.pos]) || p.s[p.pos] == '_') {
		p.pos++
	}
	if v := p.s[start:p.pos]; markerVariables[v] {
		return v, nil
	}
	p.pos = start
	return "", fmt.Errorf("a marker variable (python_version, sys_platform …) or a quoted string is missing: %w", p.unexpected())
}
