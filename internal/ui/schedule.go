package ui

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
)

var weekdays = []string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}

// scheduleMacros are the words of cron's macros.
var scheduleMacros = map[string]string{
	"":          "no schedule",
	"@hourly":   "every hour",
	"@daily":    "daily at 00:00 UTC",
	"@midnight": "daily at 00:00 UTC",
	"@weekly":   "every Sunday at 00:00 UTC",
	"@monthly":  "monthly on day 1 at 00:00 UTC",
	"@yearly":   "every 1 January at 00:00 UTC",
	"@annually": "every 1 January at 00:00 UTC",
}

// cronFields are the fields of a five-field schedule that runs in every month.
type cronFields struct {
	minute, hour, dom, dow string
}

// describeSchedule says a cron schedule in words for its common shapes (every N minutes,
// hourly, daily, on weekdays, weekly, monthly); any other schedule is shown as written.
func describeSchedule(schedule string) string {
	s := strings.TrimSpace(schedule)
	if words, ok := scheduleMacros[s]; ok {
		return words
	}
	f := strings.Fields(s)
	if len(f) != 5 || f[3] != "*" {
		return s
	}
	c := cronFields{minute: f[0], hour: f[1], dom: f[2], dow: f[4]}
	if words := c.subHourly(); words != "" {
		return words
	}
	m, ok := cronNum(c.minute, 59)
	if !ok {
		return s
	}
	if words := c.hourly(m); words != "" {
		return words
	}
	h, ok := cronNum(c.hour, 23)
	if !ok {
		return s
	}
	return cmp.Or(c.daily(fmt.Sprintf("%02d:%02d UTC", h, m)), s)
}

// cronNum is v as a number from 0 to hi.
func cronNum(v string, hi int) (int, bool) {
	n, err := strconv.Atoi(v)
	return n, err == nil && n >= 0 && n <= hi
}

// everyDay reports whether the schedule runs on every day.
func (c cronFields) everyDay() bool { return c.dom == "*" && c.dow == "*" }

// subHourly describes "every N minutes" and "every minute", "" for other shapes.
func (c cronFields) subHourly() string {
	if c.hour != "*" || !c.everyDay() {
		return ""
	}
	if c.minute == "*" {
		return "every minute"
	}
	step, ok := strings.CutPrefix(c.minute, "*/")
	if n, valid := cronNum(step, 59); ok && valid && n > 0 {
		if n == 1 {
			return "every minute"
		}
		return fmt.Sprintf("every %d minutes", n)
	}
	return ""
}

// hourly describes a run at minute m of every hour or of every N hours, "" otherwise.
func (c cronFields) hourly(m int) string {
	if !c.everyDay() {
		return ""
	}
	if c.hour == "*" {
		return fmt.Sprintf("hourly at :%02d", m)
	}
	step, ok := strings.CutPrefix(c.hour, "*/")
	if n, valid := cronNum(step, 23); ok && valid && n > 0 {
		return fmt.Sprintf("every %d hours at :%02d", n, m)
	}
	return ""
}

// daily describes a run at the time at on every day, weekday, a day of the week or of
// the month, "" for other shapes.
func (c cronFields) daily(at string) string {
	switch {
	case c.everyDay():
		return "daily at " + at
	case c.dom == "*" && (c.dow == "1-5" || c.dow == "MON-FRI"):
		return "weekdays at " + at
	case c.dom == "*":
		if d, ok := cronNum(c.dow, 7); ok {
			return "every " + weekdays[d%7] + " at " + at
		}
	case c.dow == "*":
		if d, ok := cronNum(c.dom, 31); ok && d > 0 {
			return fmt.Sprintf("monthly on day %d at %s", d, at)
		}
	}
	return ""
}
