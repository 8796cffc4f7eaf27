package ui

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSchedulesInWordsAndAsWrittenWhenUncommon(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":              "no schedule",
		"*/15 * * * *":  "every 15 minutes",
		"* * * * *":     "every minute",
		"5 * * * *":     "hourly at :05",
		"0 */6 * * *":   "every 6 hours at :00",
		"30 2 * * *":    "daily at 02:30 UTC",
		"0 6 * * 1-5":   "weekdays at 06:00 UTC",
		"0 3 * * 1":     "every Monday at 03:00 UTC",
		"0 3 * * 7":     "every Sunday at 03:00 UTC",
		"45 1 1 * *":    "monthly on day 1 at 01:45 UTC",
		"@daily":        "daily at 00:00 UTC",
		"0 0 1 1 *":     "0 0 1 1 *",
		"0 9-17 * * *":  "0 9-17 * * *",
		"15 10 * * 1,3": "15 10 * * 1,3",
	} {
		assert.Equal(t, want, describeSchedule(in, ""), in)
	}
	// In the deployment's time zone, the zone its CronJob reads the schedule in.
	assert.Equal(t, "daily at 09:00 Europe/Sofia", describeSchedule("0 9 * * *", "Europe/Sofia"))
	assert.Equal(t, "every Sunday at 00:00 America/Lima", describeSchedule("@weekly", "America/Lima"))
	assert.Equal(t, "every 15 minutes", describeSchedule("*/15 * * * *", "Europe/Sofia"))
}
