package ui

import (
	"fmt"
	"strconv"
	"strings"
)

var weekdays = []string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}

// describeSchedule says a cron schedule in words for its common shapes (every N minutes,
// hourly, daily, on weekdays, weekly, monthly); any other schedule is shown as written.
func describeSchedule(schedule string) string {
	s := strings.TrimSpace(schedule)
	switch s {
	case "":
		return "no schedule"
	case "@hourly":
		return "every hour"
	case "@daily", "@midnight":
		return "daily at 00:00 UTC"
	case "@weekly":
		return "every Sunday at 00:00 UTC"
	case "@monthly":
		return "monthly on day 1 at 00:00 UTC"
	case "@yearly", "@annually":
		return "every 1 January at 00:00 UTC"
	}
	f := strings.Fields(s)
	if len(f) != 5 || f[3] != "*" {
		return s
	}
	minute, hour, dom, dow := f[0], f[1], f[2], f[4]
	num := func(v string, hi int) (int, bool) {
		n, err := strconv.Atoi(v)
		return n, err == nil && n >= 0 && n <= hi
	}
	if step, ok := strings.CutPrefix(minute, "*/"); ok && hour == "*" && dom == "*" && dow == "*" {
		if n, ok := num(step, 59); ok && n > 0 {
			if n == 1 {
				return "every minute"
			}
			return fmt.Sprintf("every %d minutes", n)
		}
	}
	if minute == "*" && hour == "*" && dom == "*" && dow == "*" {
		return "every minute"
	}
	m, ok := num(minute, 59)
	if !ok {
		return s
	}
	if hour == "*" && dom == "*" && dow == "*" {
		return fmt.Sprintf("hourly at :%02d", m)
	}
	if step, ok := strings.CutPrefix(hour, "*/"); ok && dom == "*" && dow == "*" {
		if n, ok := num(step, 23); ok && n > 0 {
			return fmt.Sprintf("every %d hours at :%02d", n, m)
		}
	}
	h, ok := num(hour, 23)
	if !ok {
		return s
	}
	at := fmt.Sprintf("%02d:%02d UTC", h, m)
	switch {
	case dom == "*" && dow == "*":
		return "daily at " + at
	case dom == "*" && (dow == "1-5" || dow == "MON-FRI"):
		return "weekdays at " + at
	case dom == "*":
		if d, ok := num(dow, 7); ok {
			return "every " + weekdays[d%7] + " at " + at
		}
	case dow == "*":
		if d, ok := num(dom, 31); ok && d > 0 {
			return fmt.Sprintf("monthly on day %d at %s", d, at)
		}
	}
	return s
}
