package auth

import (
	"strconv"
	"time"
)

// Bounds of the security-event rows one client network can cause.
const (
	// EventRowsPerNetwork is how many events of one client network are
	// written one row each per minute. Past it, that network's events of
	// the minute are folded into one summary row per kind and rule, whose
	// detail says how many there were ("count"), when the last was
	// ("last") and that they were folded ("folded"); a summary keeps the
	// account only if every event it folds named the same one.
	EventRowsPerNetwork = 20
	// MaxEventRowsPerNetwork bounds the rows one client network adds to
	// the log in one minute: its EventRowsPerNetwork rows and one summary
	// for each kind and rule that can be folded (sign-ins failed,
	// malformed or not decided, sign-ins rejected by each of four rules,
	// resets rejected by each of three).
	MaxEventRowsPerNetwork = EventRowsPerNetwork + 10
	// eventNetworks bounds the networks whose budgets are kept at once.
	// Networks past it share one budget, and their summaries carry no
	// source, so that a flood from many networks cannot grow the
	// Recorder's memory without limit.
	eventNetworks = 10_000
	// otherNetworks is the key of that shared budget; no source is empty.
	otherNetworks = ""
)

// individualEvents are never folded: each matters on its own, and none can
// be caused at will (a success needs the password, a lockout many
// failures, a reset request passes the reset limits).
var individualEvents = map[string]bool{
	EventLoginSucceeded: true, EventNewDevice: true, EventLockout: true, EventUnlock: true,
	EventResetRequested: true, EventResetCompleted: true, EventResetMailDropped: true,
}

// eventBudget bounds the rows each client network adds to the log per
// minute, whatever the email or kind of its events: the first
// EventRowsPerNetwork foldable events of a network in a minute are kept,
// the rest are counted in summaries that are written once the minute is
// over. It is used only under the Recorder's flush lock.
type eventBudget struct {
	budgets map[budgetKey]*networkBudget
}

type budgetKey struct {
	source string
	minute int64
}

// networkBudget is one network's minute.
type networkBudget struct {
	rows      int
	summaries []*summary
}

// summary is the folded events of one kind and rule.
type summary struct {
	Event
	count int
	last  time.Time
}

// admit returns the events of batch that are written as rows; the others
// are folded into their network's summaries.
func (b *eventBudget) admit(batch []Event) []Event {
	if b.budgets == nil {
		b.budgets = map[budgetKey]*networkBudget{}
	}
	out := batch[:0:0]
	for _, e := range batch {
		if individualEvents[e.Kind] {
			out = append(out, e)
			continue
		}
		key := budgetKey{e.Source, unixMinute(e.At)}
		nb := b.budgets[key]
		if nb == nil {
			if len(b.budgets) >= eventNetworks {
				key.source = otherNetworks
				nb = b.budgets[key]
			}
			if nb == nil {
				nb = &networkBudget{}
				b.budgets[key] = nb
			}
		}
		if nb.rows < EventRowsPerNetwork {
			nb.rows++
			out = append(out, e)
			continue
		}
		nb.fold(e, key.source == otherNetworks)
	}
	return out
}

// fold counts e in the summary of its kind and rule.
func (nb *networkBudget) fold(e Event, sharedBudget bool) {
	for _, sum := range nb.summaries {
		if sum.Kind == e.Kind && sum.Rule == e.Rule {
			sum.count += eventCount(e)
			if e.At.After(sum.last) {
				sum.last = e.At
			}
			if e.At.Before(sum.At) {
				sum.At = e.At
			}
			if sum.Account != e.Account {
				sum.Account, sum.UserID = "", 0
			}
			if sum.Source != e.Source {
				sum.Source = ""
			}
			return
		}
	}
	sum := &summary{Event: e, count: eventCount(e), last: e.At}
	sum.Detail = nil
	if sharedBudget {
		sum.Source = ""
	}
	nb.summaries = append(nb.summaries, sum)
}

// close returns the summaries of the minutes before minute and forgets
// those minutes. If all is set, it returns the summaries of the later
// minutes too, but keeps counting their rows, so that writing everything
// (a shutdown, a test) does not give a network a new budget.
func (b *eventBudget) close(minute int64, all bool) []Event {
	var out []Event
	for key, nb := range b.budgets {
		over := key.minute < minute
		if !over && !all {
			continue
		}
		for _, sum := range nb.summaries {
			e := sum.Event
			e.Detail = map[string]string{
				"count":  strconv.Itoa(sum.count),
				"last":   sum.last.UTC().Format(time.RFC3339Nano),
				"folded": "true",
			}
			out = append(out, e)
		}
		nb.summaries = nil
		if over {
			delete(b.budgets, key)
		}
	}
	return out
}

// eventCount is how many events e stands for: its "count" if it is a
// coalesced or folded row, else one.
func eventCount(e Event) int {
	if n, err := strconv.Atoi(e.Detail["count"]); err == nil && n > 0 {
		return n
	}
	return 1
}
