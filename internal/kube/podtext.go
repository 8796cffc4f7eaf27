package kube

import (
	"strings"
	"unicode/utf8"
)

// MessageBytes bounds an execution's message and termination reason: the text a pod
// controls (its termination message, vdk-core's JSON in it) is kept to that much.
const MessageBytes = 4096

// Cut says which end of a pod's text PodText keeps when the text is too long.
type Cut int

const (
	// KeepHead keeps the start of the text and marks the cut with "..." (a message).
	KeepHead Cut = iota
	// KeepTail keeps the end of the text (a log: its last lines tell how it ended).
	KeepTail
)

// PodText is the one reading of text a pod controls (its termination message, its log)
// before the service keeps or shows it: the pod may print anything, but PostgreSQL's text
// refuses an invalid UTF-8 sequence or a NUL, and one such row used to fail the whole
// batch of statuses it was written with (issue 41, L1). Each NUL and each run of invalid
// bytes (a Latin-1 byte, a character cut in two) becomes U+FFFD; a text longer than n
// bytes (n > 0) is cut at a character boundary, keeping the end cut says.
func PodText(s string, n int, cut Cut) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	if n <= 0 || len(s) <= n {
		return s
	}
	if cut == KeepTail {
		i := len(s) - n
		for i < len(s) && !utf8.RuneStart(s[i]) {
			i++
		}
		return s[i:]
	}
	const mark = "..."
	i := max(0, n-len(mark))
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + mark
}
