package ui

import (
	"regexp"
	"strings"
)

// A failed run's log is read from its end, where the exception is (issue 48, item 7):
// the log box opens scrolled to its last line (console.js), and the line that says what
// failed is shown above it and marked in it, as Airflow and Dagster show the error first.

// exceptionLine is a Python exception as a traceback ends: its (dotted) class name, a
// colon and the message, or the class name alone.
var exceptionLine = regexp.MustCompile(`^(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Failure)(?::\s.*)?$`)

// errorWord is any other line that says it is an error, the fallback.
var errorWord = regexp.MustCompile(`(?i)\b(?:error|exception|fatal|failed)\b`)

// logError is a log split around its error line: Before, the line, After. Line is ""
// when no line reads as an error (then Before is the whole log).
type logError struct {
	Before, Line, After string
}

// findError splits text around the line that says why the run failed: the last Python
// exception line, else the last line naming an error.
func findError(text string) logError {
	lines := strings.SplitAfter(text, "\n")
	at := lastLine(lines, func(l string) bool { return exceptionLine.MatchString(l) })
	if at < 0 {
		at = lastLine(lines, errorWord.MatchString)
	}
	if at < 0 {
		return logError{Before: text}
	}
	line := strings.TrimRight(lines[at], "\r\n")
	return logError{
		Before: strings.Join(lines[:at], ""),
		Line:   line,
		After:  lines[at][len(line):] + strings.Join(lines[at+1:], ""),
	}
}

// lastLine is the index of the last line (trimmed) that ok accepts, or -1.
func lastLine(lines []string, ok func(string) bool) int {
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" && ok(l) {
			return i
		}
	}
	return -1
}
