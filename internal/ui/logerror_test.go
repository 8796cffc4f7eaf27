package ui

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestTheErrorLineOfAFailedLogIsFoundFromItsEnd(t *testing.T) {
	t.Parallel()
	for what, c := range map[string]struct{ log, line string }{
		"a traceback's last line, not vdk's summary after it": {
			"step 1\nTraceback (most recent call last):\n  File \"20_step.py\", line 3, in run\n    raise ValueError(\"empty\")\nValueError: the input table is empty\n" +
				"What happened: Data Job failed\nWhy it happened: user error\n",
			"ValueError: the input table is empty",
		},
		"a dotted exception class":                            {"x\nvdk.internal.core.errors.UserCodeError: step failed\ndone\n", "vdk.internal.core.errors.UserCodeError: step failed"},
		"without an exception, the last line naming an error": {"start\nERROR could not connect\nretrying\nfatal: gave up\n", "fatal: gave up"},
		"no error at all":                                     {"all good\n", ""},
		"an empty log":                                        {"", ""},
		"no newline at the end":                               {"a\nKeyError: 'x'", "KeyError: 'x'"},
	} {
		got := findError(c.log)
		assert.Equal(t, c.line, got.Line, what)
		assert.Equal(t, c.log, got.Before+got.Line+got.After, "%s: the log is kept whole", what)
	}
}

func TestDurationsReadAsPeopleSayThem(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		850 * time.Millisecond:                  "850 ms",
		2500 * time.Millisecond:                 "2.5 s",
		3 * time.Second:                         "3 s",
		11 * time.Second:                        "11 s",
		11250 * time.Millisecond:                "11 s",
		2*time.Minute + 5*time.Second:           "2 min 5 s",
		2 * time.Minute:                         "2 min",
		time.Hour + 5*time.Minute + time.Second: "1 h 5 min",
		50 * time.Hour:                          "2 d 2 h",
		-time.Second:                            "",
	} {
		assert.Equal(t, want, duration(d), d.String())
	}
}
