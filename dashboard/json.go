package dashboard

import "time"

// Stats is the body of GET /api/v1/admin/stats: the dashboard's figures
// for scripts and monitoring. Its fields are a public contract: renaming
// or dropping one breaks whoever reads it.
type Stats struct {
	Period      Period    `json:"period"`
	From        time.Time `json:"from"`
	To          time.Time `json:"to"`
	Attempts    int64     `json:"attempts"`
	Successes   int64     `json:"successes"`
	Failures    int64     `json:"failures"`
	Invalid     int64     `json:"invalid"`
	Unavailable int64     `json:"unavailable"`
	// Degraded: Redis is unreachable and limits follow FailurePolicy.
	Degraded            bool             `json:"degraded"`
	FailurePolicy       string           `json:"failure_policy"`
	CountersUnavailable bool             `json:"counters_unavailable"`
	Rejected            int64            `json:"rejected"`
	RejectedByRule      map[string]int64 `json:"rejected_by_rule"`
	Lockouts            int64            `json:"lockouts"`
	ActiveLockouts      int              `json:"active_lockouts"`
	ResetRequests       int64            `json:"reset_requests"`
	// ResetMailsDropped counts reset mails of accepted requests that were
	// not sent (queue full, domain over its limit, mail server failed).
	ResetMailsDropped int64 `json:"reset_mails_dropped"`
	// WebhooksDropped counts webhook deliveries not sent: dropped or
	// given up.
	WebhooksDropped int64          `json:"webhooks_dropped"`
	TopSources      []StatsSource  `json:"top_sources"`
	TopAccounts     []StatsAccount `json:"top_accounts"`
	PerMinute       []StatsMinute  `json:"per_minute"`
	Attack          StatsAttack    `json:"attack"`
	// Applications are the decision API's callers of the period, the
	// busiest first (at most ApplicationsListed).
	Applications []StatsApplication `json:"applications"`
	// Accounts counts the accounts, AccountsWithFactor those with a
	// confirmed second factor, now. Last, so that the fields before keep
	// their order.
	Accounts           int64 `json:"accounts"`
	AccountsWithFactor int64 `json:"accounts_with_factor"`
}

// StatsApplication is one application's decisions and reported outcomes.
type StatsApplication struct {
	Name      string `json:"name"`
	Attempts  int64  `json:"attempts"`
	Denied    int64  `json:"denied"`
	Failures  int64  `json:"failures"`
	Successes int64  `json:"successes"`
}

// StatsAttack is attack mode: whether it is on, since when (null while
// off) and what switched it on, "automatic" or "admin" (null while off).
type StatsAttack struct {
	Active  bool       `json:"active"`
	Since   *time.Time `json:"since"`
	Trigger *string    `json:"trigger"`
}

// StatsSource is a source of rejected requests and how many.
type StatsSource struct {
	Source   string `json:"source"`
	Rejected int64  `json:"rejected"`
}

// StatsAccount is an account and its failed or rejected requests.
type StatsAccount struct {
	Account          string `json:"account"`
	FailedOrRejected int64  `json:"failed_or_rejected"`
}

// StatsMinute is one minute of the chart.
type StatsMinute struct {
	Start    time.Time `json:"start"`
	Attempts int64     `json:"attempts"`
	Rejected int64     `json:"rejected"`
}

// StatsOf is d as the administrators' API serves it.
func StatsOf(d Dashboard) Stats {
	sum := d.Summary
	out := Stats{
		Period: sum.Period, From: sum.From, To: sum.To,
		Attempts: sum.Attempts, Successes: sum.Successes, Failures: sum.Failures, Invalid: sum.Invalid,
		Unavailable: sum.Unavailable, Degraded: d.Degraded, FailurePolicy: d.FailurePolicy, CountersUnavailable: d.CountersUnavailable,
		Rejected: sum.Rejected, RejectedByRule: sum.RejectedByRule,
		Lockouts: sum.Lockouts, ActiveLockouts: sum.ActiveLockouts, ResetRequests: sum.ResetRequests,
		Accounts: sum.Accounts, AccountsWithFactor: sum.AccountsWithFactor,
		ResetMailsDropped: sum.MailsDropped,
		WebhooksDropped:   sum.WebhooksDropped,
		TopSources:        make([]StatsSource, 0, len(d.TopSources)),
		TopAccounts:       make([]StatsAccount, 0, len(d.TopAccounts)),
		PerMinute:         make([]StatsMinute, 0, len(d.Series)),
		Applications:      make([]StatsApplication, 0, len(sum.Applications)),
	}
	for _, a := range sum.Applications {
		out.Applications = append(out.Applications, StatsApplication(a))
	}
	if a := d.Attack; a.Active {
		// Since and trigger are unknown (null) while Redis cannot be read.
		out.Attack = StatsAttack{Active: true}
		if !a.Since.IsZero() {
			since := a.Since.UTC()
			out.Attack.Since = &since
		}
		if a.Trigger != "" {
			trigger := a.Trigger
			out.Attack.Trigger = &trigger
		}
	}
	for _, t := range d.TopSources {
		out.TopSources = append(out.TopSources, StatsSource{t.Name, t.Count})
	}
	for _, t := range d.TopAccounts {
		out.TopAccounts = append(out.TopAccounts, StatsAccount{t.Name, t.Count})
	}
	for _, m := range d.Series {
		out.PerMinute = append(out.PerMinute, StatsMinute(m))
	}
	return out
}
