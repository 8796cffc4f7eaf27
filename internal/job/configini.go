package job

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// The run policy the VDK way: keys of the [job] section of the job's config.ini, beside
// VDK's own (schedule_cron, python_version, ...), named as the deployment body's fields.
// vdkcli uploads config.ini with the sources and cannot send the body's fields; the keys
// apply when a version is deployed (docs/api.md, "Run policy in config.ini").
const (
	ConfigSection                 = "job"
	ConfigRetries                 = "retries"
	ConfigTimeoutSeconds          = "timeout_seconds"
	ConfigConcurrencyPolicy       = "concurrency_policy"
	ConfigTimeZone                = "time_zone"
	ConfigStartingDeadlineSeconds = "starting_deadline_seconds"
	ConfigCatchUp                 = "catch_up"
	ConfigExecutionProfile        = "execution_profile"
)

// configLineBytes is how much of one line of a config.ini is read; the rest of a longer
// line is skipped (VDK's files are a few hundred bytes; a long comment is no error).
const configLineBytes = 64 << 10

// ConfigPolicy reads the run policy keys of a config.ini: an absent key sets nothing, so
// the deployment keeps its value. It reads the file as vdk-core's configparser does (lines
// "key = value" or "key: value", keys without case, whole-line comments starting with # or
// ;, indented lines continuing a value) and refuses what configparser refuses about the
// keys it reads (a key given twice in [job]) and values that are not of the field's type;
// Validate checks the bounds.
func ConfigPolicy(ini io.Reader) (PolicyChange, error) {
	values, err := configSection(ini, ConfigSection)
	if err != nil {
		return PolicyChange{}, err
	}
	var c PolicyChange
	for _, f := range []struct {
		key string
		set func(string) error
	}{
		{ConfigRetries, func(v string) error { return parseInt(v, &c.Retries) }},
		{ConfigTimeoutSeconds, func(v string) error { return parseInt(v, &c.TimeoutSeconds) }},
		{ConfigStartingDeadlineSeconds, func(v string) error { return parseInt(v, &c.StartingDeadlineSeconds) }},
		{ConfigCatchUp, func(v string) error { return parseInt(v, &c.CatchUp) }},
		{ConfigConcurrencyPolicy, func(v string) error { c.ConcurrencyPolicy = &v; return nil }},
		{ConfigTimeZone, func(v string) error { c.TimeZone = &v; return nil }},
		{ConfigExecutionProfile, func(v string) error { c.ExecutionProfile = &v; return nil }},
	} {
		v, ok := values[f.key]
		if !ok {
			continue
		}
		if err := f.set(v); err != nil {
			return PolicyChange{}, Invalid("config.ini ["+ConfigSection+"] "+f.key, "a whole number", quote(v))
		}
	}
	return c, nil
}

// parseInt parses a decimal integer that fits T into *dst.
func parseInt[T int | int32 | int64](v string, dst **T) error {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return err
	}
	t := T(n)
	if int64(t) != n {
		return strconv.ErrRange
	}
	*dst = &t
	return nil
}

// configSection returns the keys (lower case) and values of one section of an INI file.
// Of a line longer than configLineBytes the start is read and the rest skipped, its value
// marked cut ("...") so that none of the policy's values passes with it.
func configSection(ini io.Reader, section string) (map[string]string, error) {
	values := map[string]string{}
	in, last := false, ""
	r := bufio.NewReaderSize(ini, configLineBytes)
	for n := 1; ; n++ {
		raw, err := readLine(r)
		if errors.Is(err, io.EOF) {
			return values, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read config.ini: %w", err)
		}
		line := strings.TrimSpace(raw)
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
			continue
		case raw[0] == ' ' || raw[0] == '\t':
			if in && last != "" { // a continuation of the previous value
				values[last] = strings.TrimSpace(values[last] + "\n" + line)
			}
			continue
		case line[0] == '[' && line[len(line)-1] == ']':
			in, last = strings.EqualFold(strings.TrimSpace(line[1:len(line)-1]), section), ""
			continue
		}
		i := strings.IndexAny(line, "=:")
		if !in || i < 0 {
			continue // outside the section, or a line configparser refuses (vdk says so)
		}
		key := strings.ToLower(strings.TrimSpace(line[:i]))
		if _, dup := values[key]; dup {
			return nil, Invalid("config.ini ["+section+"] "+key, "given once", fmt.Sprintf("given twice (line %d)", n))
		}
		values[key], last = strings.TrimSpace(line[i+1:]), key
	}
}

// readLine reads one line without its end ("\n" or "\r\n"): at most configLineBytes of
// it, with "..." in place of the rest.
func readLine(r *bufio.Reader) (string, error) {
	chunk, more, err := r.ReadLine()
	if err != nil {
		return "", err
	}
	line := string(chunk)
	for more {
		if _, more, err = r.ReadLine(); err != nil && !errors.Is(err, io.EOF) {
			return "", err
		}
		line = strings.TrimSuffix(line, "...") + "..."
	}
	return line, nil
}
