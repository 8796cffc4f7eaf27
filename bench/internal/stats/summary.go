package stats

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// Summary is "p50 …, p99 …, max …" of ds, to 0.1 ms ("none" without any).
func Summary(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	p := Percentiles(ds, 50, 99, 100)
	r := func(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }
	return fmt.Sprintf("p50 %s, p99 %s, max %s", r(p[0]), r(p[1]), r(p[2]))
}

// LoadAverage is the first three fields of /proc/loadavg ("?" where there is none): a
// benchmark prints it, as its numbers depend on what else the machine runs.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}
