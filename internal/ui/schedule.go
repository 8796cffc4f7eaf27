package ui

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/datajobs/datajobs/internal/job"
)

var weekdays = []string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}

// scheduleMacros are the words of cron's macros; %s is the time zone.
var scheduleMacros = map[string]string{
	"":          "no schedule",
	"@hourly":   "every hour",
	"@daily":    "daily at 00:00 %s",
	"@midnight": "daily at 00:00 %s",
	"@weekly":   "every Sunday at 00:00 %s",
	"@monthly":  "monthly on day 1 at 00:00 %s",
	"@yearly":   "every 1 January at 00:00 %s",
	"@annually": "every 1 January at 00:00 %s",
}

// cronFields are the fields of a five-field schedule that runs in every month.
type cronFields struct {
	minute, hour, dom, dow string
}

// describeSchedule says a cron schedule in words for its common shapes (every N minutes,
// hourly, daily, on weekdays, weekly, monthly), its times in time zone tz (empty: UTC),
// the zone its CronJob reads it in; any other schedule is shown as written.
func describeSchedule(schedule, tz string) string {
	s := strings.TrimSpace(schedule)
	tz = cmp.Or(tz, job.DefaultTimeZone)
	if words, ok := scheduleMacros[s]; ok {
		if strings.Contains(words, "%s") {
			return fmt.Sprintf(words, tz)
		}
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
	return cmp.Or(c.daily(fmt.Sprintf("%02d:%02d %s", h, m, tz)), s)
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

// zonedTime is a schedule time as pages show it: relative to now, and on the wall clock
// of the time zone the schedule runs in, with UTC in the tooltip.
type zonedTime struct {
	At       time.Time
	Relative string
	// Local is the time in the schedule's zone, with the zone: "2026-12-02 09:00 Europe/Sofia".
	Local string
}

// zones caches the time zones pages show times in (time.LoadLocation reads a file).
var zones sync.Map // name → *time.Location

// zoned is t on the wall clock of tz (empty: UTC); an unknown zone (validated on deploy,
// so only an older tzdata) shows UTC, named as such.
func zoned(now, t time.Time, tz string) zonedTime {
	tz = cmp.Or(tz, job.DefaultTimeZone)
	loc, ok := zones.Load(tz)
	if !ok {
		l, err := time.LoadLocation(tz)
		if err != nil {
			l, tz = time.UTC, job.DefaultTimeZone
		}
		loc, _ = zones.LoadOrStore(tz, l)
	}
	return zonedTime{At: t, Relative: ago(now, t), Local: t.In(loc.(*time.Location)).Format("2006-01-02 15:04") + " " + tz}
}

// nextRuns are the next n runs of schedule after now as its CronJob fires it, in time zone
// tz (job.ScheduleTimes); none for an empty, invalid or never-firing schedule.
func nextRuns(schedule, tz string, now time.Time, n int) []zonedTime {
	times, err := job.ScheduleTimes(schedule, tz, now, now.AddDate(5, 0, 0), n)
	if err != nil {
		return nil
	}
	out := make([]zonedTime, 0, len(times))
	for _, t := range times {
		out = append(out, zoned(now, t, tz))
	}
	return out
}
