package job

import "strings"

// What of a finished execution's log a notification carries: its last lines, bounded, so
// that a mail says why a run failed without becoming the log (the console has the rest).
const (
	NotificationLogLines = 20
	NotificationLogBytes = 4 << 10
)

// LogTail returns the last n lines of logs, at most maxBytes of them (whole lines, the
// newest kept; a single line longer than that is cut from its start).
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
				return lines[i][len(lines[i])-maxBytes:]
			}
			lines = lines[i+1:]
			break
		}
	}
	return strings.Join(lines, "\n")
}
