package auth

import (
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Bounds of the security-event rows one client network can cause.
const (
	// EventRowsPerNetwork is how many events of one client network are
	// written one row each per minute. Past it, that network's events of
	// the minute are folded into one summary row per kind and rule, whose
	// detail says how many there were ("count"), when the last was
	// ("last") and that they were folded ("folded"); a summary keeps the
	// account only if every event it folds named the same one, and the
	// source only if they all came from one. A network here is an IPv4
	// /24 or an IPv6 /48, wider than the networks limits count, so that
	// the many /64s of one IPv6 customer share one budget.
	EventRowsPerNetwork = 20
	// EventRowsPerMinute bounds the rows written one each in one minute
	// across all networks; past it, every network's foldable events of
	// the minute are folded into the summaries of one shared budget
	// (without a source), so that a flood from many networks adds at most
	// about this many rows a minute.
	EventRowsPerMinute = 5_000
	// eventNetworks bounds the networks whose budgets are kept at once.
	// Networks past it share that one budget too, so that a flood from
	// many networks cannot grow the recorder's memory without limit.
	eventNetworks = 10_000
	// otherNetworks is the key of the shared budget; no source has it.
	otherNetworks = "*"
)

// MaxEventRowsPerNetwork bounds the rows one client network adds to the
// log in one minute: its EventRowsPerNetwork rows and one summary for each
// kind and rule that can be folded: the kinds that name no rule
// (foldedWithoutRule), a lockout's rejections (1), the successes and
// reset requests applications report (appReported), and the rejections of every rule of
// the table but the link mails' (whose drops keep a row each). It is
// counted from the table, so that a new rule cannot leave it short, and
// TestEveryEventKindIsBudgeted keeps a new kind from doing so.
var MaxEventRowsPerNetwork = EventRowsPerNetwork + foldedSummaries()

// foldedWithoutRule are the kinds of events that are folded past a
// network's budget and name no rule: each folds into one summary.
var foldedWithoutRule = []string{
	EventLoginFailed, EventLoginInvalid, EventLoginUnavailable, EventMFAFailed,
	// An application's: its key holder reports them at will.
	EventAttemptAllowed, EventResetFailed,
	// An owner's acts on the account's sessions and devices: any session
	// of any account may repeat them, and RuleAccountIP counts them per
	// address or /64, not per network. A summary of one account's keeps
	// the account.
	EventSessionEnded, EventDeviceForgotten,
}

func foldedSummaries() int {
	n := len(foldedWithoutRule) + 1 + len(appReported)
	for _, r := range rules {
		if r.Flow != FlowLinkMail {
			n++
		}
	}
	return n
}

// individualEvents are never folded: each matters on its own, and none can
// be caused at will (a success needs the password, but for those an
// application reports, which individual leaves out; a lockout many
// failures, a sprayed password as many failures on distinct accounts, a
// request for a link passes its limits, the others are an owner's or an
// administrator's acts).
var individualEvents = map[string]bool{
	EventLoginSucceeded: true, EventNewDevice: true, EventLockout: true, EventUnlock: true,
	EventLockoutEnded: true,
	// A second step's: its lock takes its rule's threshold of wrong codes,
	// each within the per-network rates, as a password's lockout takes
	// failures; the step itself the right password, a recovery code one
	// of the account's, a copied passkey's refusal a signature of a
	// registered key. Folded, a summary of two accounts' would name
	// neither: a lock, or the proof that someone has the password, that
	// nobody could trace to its account.
	EventMFALockout: true, EventMFARequired: true, EventRecoveryCodeUsed: true, EventPasskeyCloned: true,
	EventResetRequested: true, EventResetCompleted: true, EventResetMailDropped: true,
	EventUnlockRequested: true, EventUnlockConfirmed: true, EventSignedOutEverywhere: true,
	EventPasswordSprayed: true,
	EventPasswordChanged: true,
	// A held right password needs the password, a used sign-in link the
	// owner's mailbox.
	EventVerificationRequired: true, EventVerificationConfirmed: true,
	// One per account that had a new browser when attack mode started.
	EventNewDeviceSignedOut: true,
	// An administrator's acts on accounts: the audit trail of who did what
	// (Detail "by"), and user.disabled and user.deleted webhooks that must
	// name the account.
	EventUserCreated: true, EventUserDisabled: true, EventUserEnabled: true, EventUserDeleted: true,
	EventUserPromoted: true, EventUserDemoted: true, EventPasswordSet: true, EventEventsExported: true,
	// And on API keys: who gave an application a key, and when it ended.
	EventAPIKeyCreated: true, EventAPIKeyRevoked: true,
	// Second factors added or removed and recovery codes regenerated: the
	// password typed again, or an administrator's act, and each mailed to
	// the owner.
	EventFactorAdded: true, EventFactorRemoved: true, EventRecoveryCodesRegenerated: true,
}

// appReported are the kinds of individualEvents an application reports
// at will through the decision API: its key holder names the account and
// the client of a success or a reset request, and needs no password to
// report one, nor a network of its own to pass the reset's limits (it
// names the client). Its events of them (Detail "app") are folded as
// failures are, so that no key fills the log.
var appReported = map[string]bool{EventLoginSucceeded: true, EventNewDevice: true, EventResetCompleted: true, EventResetRequested: true}

// individual reports whether e keeps a row of its own whatever its
// network's budget.
func individual(e Event) bool {
	return individualEvents[e.Kind] && (!appReported[e.Kind] || e.Detail["app"] == "")
}

// budgetNetwork is the network whose budget an event from source counts
// against: the IPv4 /24 or IPv6 /48 around it. A source that is not an
// address ("unknown") is its own network.
func budgetNetwork(source string) string {
	// Parsed as what it looks like, not tried as a prefix first: a failed
	// parse allocates its error, for every event of an IPv4 client.
	var addr netip.Addr
	if strings.IndexByte(source, '/') >= 0 {
		p, err := netip.ParsePrefix(source)
		if err != nil {
			return source
		}
		addr = p.Addr()
	} else if a, err := netip.ParseAddr(source); err == nil {
		addr = a
	} else {
		return source
	}
	bits := 24
	if addr.Is6() {
		bits = 48
	}
	p, err := addr.Prefix(bits)
	if err != nil {
		return source
	}
	return p.String()
}

// eventBudget bounds the rows each client network adds to the log per
// minute, whatever the email or kind of its events: the first
// EventRowsPerNetwork foldable events of a network in a minute are kept,
// the rest are counted in summaries that are written once the minute is
// over. It is used only under the recorder's flush lock.
type eventBudget struct {
	budgets   map[budgetKey]*networkBudget
	perMinute map[int64]int // rows written one each, by minute
	// lastSource's network is lastNetwork: a flood's events come from a
	// few sources, mostly one after another, and each network's name
	// would otherwise be written anew for each event.
	lastSource, lastNetwork string
}

// network is budgetNetwork(source), remembered for the last source.
func (b *eventBudget) network(source string) string {
	if source != b.lastSource || b.lastNetwork == "" {
		b.lastSource, b.lastNetwork = source, budgetNetwork(source)
	}
	return b.lastNetwork
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
	// app and key are the Detail "app" and "key" (an application's key
	// named otherwise) of every event folded, "" once two differ: a
	// summary of one application's events still says which.
	app, key string
}

// admit returns the events of batch that are written as rows; the others
// are folded into their network's summaries.
func (b *eventBudget) admit(batch []Event) []Event {
	if b.budgets == nil {
		b.budgets = map[budgetKey]*networkBudget{}
		b.perMinute = map[int64]int{}
	}
	out := batch[:0:0]
	for _, e := range batch {
		if individual(e) {
			out = append(out, e)
			continue
		}
		minute := unixMinute(e.At)
		key := budgetKey{b.network(e.Source), minute}
		if b.perMinute[minute] >= EventRowsPerMinute {
			key.source = otherNetworks
		}
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
		if nb.rows < EventRowsPerNetwork && b.perMinute[minute] < EventRowsPerMinute {
			nb.rows++
			b.perMinute[minute]++
			out = append(out, e)
			continue
		}
		nb.fold(e, key.source)
	}
	return out
}

// fold counts e in the summary of its kind and rule; network is the
// budget's key, which a summary of several sources names.
func (nb *networkBudget) fold(e Event, network string) {
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
			if sum.app != e.Detail["app"] || sum.key != e.Detail["key"] {
				sum.app, sum.key = "", ""
			}
			if sum.Source != e.Source && network != otherNetworks {
				sum.Source = network
			} else if sum.Source != e.Source {
				sum.Source = ""
			}
			return
		}
	}
	sum := &summary{Event: e, count: eventCount(e), last: e.At, app: e.Detail["app"], key: e.Detail["key"]}
	sum.Detail = nil
	if network == otherNetworks {
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
			if sum.app != "" {
				e.Detail["app"] = sum.app
				if sum.key != "" {
					e.Detail["key"] = sum.key
				}
			}
			out = append(out, e)
		}
		nb.summaries = nil
		if over {
			delete(b.budgets, key)
		}
	}
	for m := range b.perMinute {
		if m < minute {
			delete(b.perMinute, m)
		}
	}
	return out
}

// CountsEvents reports whether the "count" in the detail of an event of
// kind is how many events its row stands for: a coalesced rejection's
// (coalesceRejections) or a folded summary's. Other events' "count"
// counts something else (the sessions one ended, the factors one act
// removed) and the row is one event.
func CountsEvents(kind string, detail map[string]string) bool {
	return kind == EventLoginRejected || kind == EventResetRejected || detail["folded"] == "true"
}

// eventCount is how many events e stands for: its "count" if it is a
// coalesced or folded row (CountsEvents), else one.
func eventCount(e Event) int {
	if !CountsEvents(e.Kind, e.Detail) {
		return 1
	}
	// Only a count present is parsed: Atoi's error for a missing one is
	// an allocation for each event folded.
	if c, ok := e.Detail["count"]; ok {
		if n, err := strconv.Atoi(c); err == nil && n > 0 {
			return n
		}
	}
	return 1
}

func unixMinute(t time.Time) int64 { return t.Unix() / 60 }
