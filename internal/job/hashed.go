package job

// Hashed schedules (issue 45): a data job's schedule may say H in a field instead of a
// value: "H * * * *" (once an hour, at a minute of the job's own), "H(0-29) 2 * * *" (between 02:00 and 02:29),
// "H/15 * * * *" (every 15 minutes, from an offset of the job's own). Many jobs written
// "H" spread over the field's range where "0" would start them all in the same minute, and
// each job keeps its own value for ever: the value is a pure function of the key (the
// job's "team/name") and the field, never of the process (no Go map hash, no random
// seed), so that it is the same across restarts, replicas and versions.
//
// The value of a field is lo + h mod n, where [lo, hi] is the field's range (or the
// range H(lo-hi) names), n is its width (or the step of H/step) and h is the 64-bit FNV-1a
// hash (the FNV reference parameters, as Go's hash/fnv has them) of the bytes
// "<key>#<field>", field being one of minute, hour, day-of-month, month, day-of-week.
// The day of the month takes its H values in 1-28, so that a hashed day fires in every
// month. H/step is the range from the hashed start to the field's end by step ("H/15"
// in the minutes is "7-59/15" for a start of 7).

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
)

// hashField is one position of a five-field cron expression and the values H takes in it.
type hashField struct {
	name   string
	lo, hi int // the values the field accepts
	hashHi int // the highest value a bare H takes (the day of the month stops at 28)
}

var hashFields = [5]hashField{
	{"minute", 0, 59, 59},
	{"hour", 0, 23, 23},
	{"day-of-month", 1, 31, 28},
	{"month", 1, 12, 12},
	{"day-of-week", 0, 6, 6},
}

// HasHashedFields reports whether expr has a hashed field (one starting with H). Day and month names
// (THU) never start with H.
func HasHashedFields(expr string) bool {
	for f := range strings.FieldsSeq(expr) {
		if strings.HasPrefix(f, "H") {
			return true
		}
	}
	return false
}

// ResolveHashed returns expr with every hashed field replaced by its value for key; fields
// without H are kept as they are (the cron parser checks them). An expression with H
// must have five fields; an H field must be H, H(lo-hi), H/step or H(lo-hi)/step, within
// the field's range. The error names the field.
func ResolveHashed(expr, key string) (string, error) {
	parts := strings.Fields(expr)
	if !HasHashedFields(expr) {
		return expr, nil
	}
	if len(parts) != len(hashFields) {
		return "", fmt.Errorf("a schedule with H has five fields (minute hour day-of-month month day-of-week), this one %d", len(parts))
	}
	for i, p := range parts {
		if !strings.HasPrefix(p, "H") {
			continue
		}
		v, err := hashFields[i].resolve(p, key)
		if err != nil {
			return "", fmt.Errorf("%s field %q: %w", hashFields[i].name, p, err)
		}
		parts[i] = v
	}
	return strings.Join(parts, " "), nil
}

// resolve is the value of the hashed field p of this field for key.
func (f hashField) resolve(p, key string) (string, error) {
	lo, hi, step, err := f.parse(p)
	if err != nil {
		return "", err
	}
	h := fnv1a(key + "#" + f.name)
	if step == 0 {
		return strconv.Itoa(lo + int(h%uint64(hi-lo+1))), nil
	}
	start := lo + int(h%uint64(min(step, hi-lo+1)))
	return fmt.Sprintf("%d-%d/%d", start, hi, step), nil
}

// parse reads H, H(lo-hi), H/step or H(lo-hi)/step: the range H takes its value in and
// the step (0: none).
func (f hashField) parse(p string) (lo, hi, step int, err error) {
	const forms = "H, H(lo-hi), H/step or H(lo-hi)/step"
	rest := strings.TrimPrefix(p, "H")
	lo, hi = f.lo, f.hashHi
	if r, ok := strings.CutPrefix(rest, "("); ok {
		inner, after, ok := strings.Cut(r, ")")
		if !ok {
			return 0, 0, 0, fmt.Errorf("one of %s: no closing parenthesis", forms)
		}
		a, b, ok := strings.Cut(inner, "-")
		if lo, err = strconv.Atoi(a); !ok || err != nil {
			return 0, 0, 0, fmt.Errorf("one of %s: %q is no range lo-hi", forms, inner)
		}
		if hi, err = strconv.Atoi(b); err != nil {
			return 0, 0, 0, fmt.Errorf("one of %s: %q is no range lo-hi", forms, inner)
		}
		if lo < f.lo || hi > f.hi || lo > hi {
			return 0, 0, 0, fmt.Errorf("a range within %d-%d, lowest first (%d-%d)", f.lo, f.hi, lo, hi)
		}
		rest = after
	} else if strings.HasPrefix(rest, "/") {
		hi = f.hi // a step runs to the field's end
	}
	switch {
	case rest == "":
		return lo, hi, 0, nil
	case strings.HasPrefix(rest, "/"):
		step, err = strconv.Atoi(rest[1:])
		if err != nil || step < 1 || step > f.hi-f.lo+1 {
			return 0, 0, 0, fmt.Errorf("a step between 1 and %d after H/", f.hi-f.lo+1)
		}
		return lo, hi, step, nil
	default:
		return 0, 0, 0, fmt.Errorf("one of %s", forms)
	}
}

// fnv1a is the 64-bit FNV-1a hash of s.
func fnv1a(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s)) // a hash.Hash never fails to write
	return h.Sum64()
}

// HashKey is the key a job's hashed fields are resolved with: "<team>/<name>".
func HashKey(team, name string) string { return team + "/" + name }

// ResolveSchedule splits the schedule a user sent for the job team/name into the one its
// CronJob runs (hashed fields resolved) and the one to show back: hashed is sent when it
// has H fields, "" otherwise (the two are then the same). The store keeps both, so that
// every reader of a schedule (the CronJob, next runs, missed runs, lateness) reads the
// resolved one, and the API answers with what was sent. A schedule that does not resolve
// (ValidateSchedule refuses it first) is kept as sent.
func ResolveSchedule(team, name, sent string) (schedule, hashed string) {
	if !HasHashedFields(sent) {
		return sent, ""
	}
	resolved, err := ResolveHashed(sent, HashKey(team, name))
	if err != nil {
		return sent, ""
	}
	return resolved, sent
}
