package job

import (
	"strings"
	"unicode/utf8"
)

// What of a finished execution's log a notification carries: its last lines, bounded, so
// that a mail says why a run failed without becoming the log (the console has the rest).
const (
	NotificationLogLines = 20
	NotificationLogBytes = 4 << 10
)

// LogTail returns the last n lines of logs, at most maxBytes of them (whole lines, the
// newest kept; a single line longer than that is cut from its start at a character
// boundary, since half a character would fail the row the tail is written with: issue
// 41, L1).
func LogTail(logs string, n, maxBytes int) string {
	lines := strings.Split(strings.TrimRight(logs, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	size := 0
	for i := len(lines) - 1; i >= 0; i-- {
		size += len(lines[i]) + 1
		if size > maxBytes {
			if i == len(lines)-1 {
				l, from := lines[i], len(lines[i])-maxBytes
				for from < len(l) && !utf8.RuneStart(l[from]) {
					from++
				}
				return l[from:]
			}
			lines = lines[i+1:]
			break
		}
	}
	return strings.Join(lines, "\n")
}
