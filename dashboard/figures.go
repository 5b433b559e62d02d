package dashboard

import (
	"fmt"
	"strconv"
	"time"

	"github.com/xcloak/xcloak/auth"
)

// Period is how far back the dashboard's figures reach, in whole minutes
// ending with the current one: Period5m is the current minute so far and
// the four before it. Counting whole minutes is what lets every replica
// read the same buckets and report the same numbers.
type Period int

// The periods the dashboard offers.
const (
	Period5m  Period = 5
	Period1h  Period = 60
	Period24h Period = 24 * 60
)

// Periods lists the periods the dashboard offers, shortest first.
func Periods() []Period { return []Period{Period5m, Period1h, Period24h} }

// ErrInvalidPeriod: a period other than 5m, 1h or 24h. It is also an
// ErrInvalidRequest.
var ErrInvalidPeriod = fmt.Errorf("%w: period must be 5m, 1h or 24h", auth.ErrInvalidRequest)

// ParsePeriod reads "5m", "1h" or "24h"; anything else is ErrInvalidPeriod.
func ParsePeriod(s string) (Period, error) {
	for _, p := range Periods() {
		if p.String() == s {
			return p, nil
		}
	}
	return 0, ErrInvalidPeriod
}

// String is the period as ParsePeriod reads it.
func (p Period) String() string {
	switch p {
	case Period5m:
		return "5m"
	case Period1h:
		return "1h"
	case Period24h:
		return "24h"
	}
	return "Period(" + strconv.Itoa(int(p)) + ")"
}

// MarshalText writes the period as ParsePeriod reads it, so JSON shows "5m".
func (p Period) MarshalText() ([]byte, error) {
	if !p.Valid() {
		return nil, ErrInvalidPeriod
	}
	return []byte(p.String()), nil
}

// Valid reports whether p is one of Periods.
func (p Period) Valid() bool { return p == Period5m || p == Period1h || p == Period24h }

// Summary is the headline figures of one period.
type Summary struct {
	Period Period
	// From is the start of the first minute counted; To the end of the
	// current one.
	From, To time.Time
	// Attempts counts every sign-in request received, rejected and
	// malformed ones included: Successes + Failures + Rejected + Invalid +
	// Unavailable.
	Attempts    int64
	Successes   int64
	Failures    int64
	Invalid     int64
	Unavailable int64
	// Rejected counts sign-in requests a limit or a lockout refused.
	Rejected int64
	// RejectedByRule counts refused requests, sign-ins and resets, by the
	// rule that refused them; every rule of auth.RejectionRules is present.
	RejectedByRule map[string]int64
	// Lockouts counts accounts locked in the period.
	Lockouts int64
	// ResetRequests counts accepted password-reset requests.
	ResetRequests int64
	// MailsDropped counts reset mails of accepted requests that were not
	// sent (queue full, domain over its limit, mail server failed).
	MailsDropped int64
	// WebhooksDropped counts webhook deliveries not sent: dropped (a
	// receiver's queue full, or shutdown) or given up (refused, or every
	// attempt failed).
	WebhooksDropped int64
	// ActiveLockouts is how many lockouts are in force now. Stats cannot
	// know it (lockouts live in Postgres); Reader.Dashboard fills it in.
	ActiveLockouts int
	// Accounts counts the accounts now, AccountsWithFactor those with a
	// confirmed second factor; Reader.Dashboard fills them in, as
	// ActiveLockouts.
	Accounts, AccountsWithFactor int64
	// Applications are the decision API's callers that asked in the
	// period, the busiest first, at most ApplicationsListed.
	Applications []Application
}

// ApplicationsListed bounds the applications a summary lists.
const ApplicationsListed = 50

// Application is what one application (an API key's name) asked of the
// decision API in a period, and what it reported.
type Application struct {
	Name string
	// Attempts counts its decisions, denied ones included.
	Attempts int64
	// Denied counts the decisions a limit or a lockout denied.
	Denied int64
	// Failures and Successes count the sign-in outcomes it reported.
	Failures  int64
	Successes int64
}

// Minute is one minute of the dashboard's chart.
type Minute struct {
	Start    time.Time
	Attempts int64 // sign-in requests
	Rejected int64 // sign-in requests refused by a limit or lockout
}

// Ranked is one entry of a ranking.
type Ranked struct {
	Name  string // a source ("192.0.2.1", "2001:db8::/64") or an account
	Count int64
}

// SeriesMinutes is how many minutes the dashboard's chart shows.
const SeriesMinutes = 60

// Snapshot is every figure the dashboard shows. The summary and the
// series are read in one Redis transaction, so that they agree with each
// other; the rankings are read after, and may be up to a few seconds
// behind them in the current minute (counters.Stats keeps each merged
// ranking for every replica).
type Snapshot struct {
	Summary     Summary
	Series      []Minute // the last SeriesMinutes minutes, oldest first
	TopSources  []Ranked
	TopAccounts []Ranked
}
