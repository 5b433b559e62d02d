package templates

import (
	"strconv"
	"time"

	"github.com/xcloak/xcloak/auth"
)

// RetryText is the message shown when a form is rate limited, for a wait of
// the given number of seconds. Waits under two minutes are given in seconds;
// longer waits in whole minutes, rounded up so the user never comes back too
// early. A wait of zero or less, which callers should not show at all, reads
// as "a moment" rather than a nonsensical number.
func RetryText(seconds int) string {
	return "Too many attempts. Try again in " + retryWait(seconds) + "."
}

// retryWait is the wait part of RetryText, e.g. "45 seconds" or "3 minutes".
func retryWait(seconds int) string {
	switch {
	case seconds <= 0:
		return "a moment"
	case seconds < 120:
		return plural(seconds, "second")
	default:
		return plural((seconds+59)/60, "minute")
	}
}

// linkLife is how long a mailed link works, as its mail says it
// (auth.LinkLife).
func linkLife(d time.Duration) string { return auth.LinkLife(d) }

// plural joins n and unit, adding an "s" unless n is one.
func plural(n int, unit string) string {
	s := strconv.Itoa(n) + " " + unit
	if n != 1 {
		s += "s"
	}
	return s
}

// Times are shown in UTC, labelled as such: the server does not know the
// reader's time zone, and a labelled time is never silently wrong.
const (
	dateLayout     = "2 January 2006"
	dateTimeLayout = "2 January 2006 at 15:04 UTC"
)

// dateText is t as a calendar date in UTC, or "Unknown" for the zero time.
func dateText(t time.Time) string {
	if t.IsZero() {
		return "Unknown"
	}
	return t.UTC().Format(dateLayout)
}

// dateTimeText is t as a date and time of day in UTC, or "Unknown" for the
// zero time.
func dateTimeText(t time.Time) string {
	if t.IsZero() {
		return "Unknown"
	}
	return t.UTC().Format(dateTimeLayout)
}

// machineTime is t in the form the datetime attribute of <time> expects.
func machineTime(t time.Time) string {
	return t.UTC().Format(time.RFC3339)
}
