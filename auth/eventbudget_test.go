package auth

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/internal/race"
	"github.com/xcloak/xcloak/internal/testenv"
)

// TestEventBudget: past EventRowsPerNetwork rows, a network's events of a
// minute are folded into one summary per kind and rule, counted exactly;
// events that matter individually never are; a minute's summaries come out
// once it is over; and the budgets kept are bounded however many networks
// send.
func TestEventBudget(t *testing.T) {
	var b eventBudget
	minute := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	var batch []Event
	for i := range 1000 {
		at := minute.Add(time.Duration(i) * time.Millisecond)
		batch = append(batch,
			Event{At: at, Kind: EventLoginRejected, Account: fmt.Sprintf("u%d@example.com", i), Source: "192.0.2.1", Rule: RuleLoginIP},
			Event{At: at, Kind: EventLoginInvalid, Source: "192.0.2.1"},
			Event{At: at, Kind: EventLoginRejected, Account: "victim@example.com", Source: "192.0.2.1", Rule: RuleLockout},
		)
	}
	batch = append(batch, Event{At: minute.Add(time.Second), Kind: EventLoginSucceeded, Account: "ann@example.com", Source: "192.0.2.1"})
	rows := b.admit(batch)
	if len(rows) != EventRowsPerNetwork+1 || rows[len(rows)-1].Kind != EventLoginSucceeded {
		t.Fatalf("%d rows kept, want %d and the success", len(rows), EventRowsPerNetwork+1)
	}
	if open := b.close(unixMinute(minute), false); len(open) != 0 {
		t.Fatalf("summaries of a minute not over yet: %+v", open)
	}
	sums := b.close(unixMinute(minute)+1, false)
	if len(sums) != 3 {
		t.Fatalf("summaries %+v, want 3 (one per kind and rule)", sums)
	}
	total := len(rows) - 1
	for _, s := range sums {
		total += eventCount(s)
		if s.Detail["folded"] != "true" || s.Source != "192.0.2.1" {
			t.Errorf("summary %+v: want folded, with the network", s)
		}
		switch s.Rule {
		case RuleLockout:
			if s.Account != "victim@example.com" {
				t.Errorf("summary of one account's rejections lost the account: %+v", s)
			}
		case RuleLoginIP:
			if s.Account != "" {
				t.Errorf("summary of many accounts' rejections names %q", s.Account)
			}
		}
	}
	if total != 3000 {
		t.Fatalf("rows and summaries count %d events, want 3000", total)
	}
	if len(b.budgets) != 0 {
		t.Fatalf("%d budgets left after closing the minute", len(b.budgets))
	}

	// A flood from more networks than eventNetworks keeps at most that
	// many budgets (and one shared by the rest).
	batch = batch[:0]
	for i := range 3 * eventNetworks {
		batch = append(batch, Event{At: minute, Kind: EventLoginInvalid, Source: fmt.Sprintf("%d.%d.%d.1", 10+i>>16, i>>8&255, i&255)})
	}
	rows = b.admit(batch)
	if len(b.budgets) > eventNetworks+1 {
		t.Fatalf("%d budgets kept, want at most %d", len(b.budgets), eventNetworks+1)
	}
	total = len(rows)
	for _, s := range b.close(unixMinute(minute), true) {
		total += eventCount(s)
	}
	if total != 3*eventNetworks {
		t.Fatalf("rows and summaries count %d events, want %d", total, 3*eventNetworks)
	}

	// Writing everything before the minute is over keeps the rows
	// counted: the network gets no new budget.
	b = eventBudget{}
	flood := func() []Event {
		var batch []Event
		for range 2 * EventRowsPerNetwork {
			batch = append(batch, Event{At: minute, Kind: EventLoginInvalid, Source: "192.0.2.9"})
		}
		return batch
	}
	first := len(b.admit(flood()))
	nsums := len(b.close(unixMinute(minute), true))
	second := len(b.admit(flood()))
	if first != EventRowsPerNetwork || nsums != 1 || second != 0 {
		t.Fatalf("rows %d, summaries %d, then rows %d; want %d, 1, 0", first, nsums, second, EventRowsPerNetwork)
	}
	if sums := b.close(unixMinute(minute)+1, false); len(sums) != 1 || eventCount(sums[0]) != 2*EventRowsPerNetwork || len(b.budgets) != 0 {
		t.Fatalf("summaries %+v after the minute, want one counting %d, and no budget left", sums, 2*EventRowsPerNetwork)
	}
}

// TestEventBudgetNetworksAndMinute: the many /64s of one IPv6 /48 (and
// the addresses of one IPv4 /24) share one budget; a flood from many
// networks writes at most EventRowsPerMinute rows a minute; acts of owners
// and administrators keep a row of their own, details and all, whatever
// floods the minute; and every event is still counted.
func TestEventBudgetNetworksAndMinute(t *testing.T) {
	minute := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	count := func(b *eventBudget, rows []Event) (n int) {
		n = len(rows)
		for _, s := range b.close(unixMinute(minute)+1, false) {
			n += eventCount(s)
		}
		return n
	}

	var b eventBudget
	var batch []Event
	for i := range 300 {
		for range 30 {
			batch = append(batch, Event{At: minute, Kind: EventLoginInvalid, Source: fmt.Sprintf("2001:db8:7:%x::/64", i)})
			batch = append(batch, Event{At: minute, Kind: EventLoginFailed, Source: fmt.Sprintf("198.51.100.%d", i%250)})
		}
	}
	rows := b.admit(batch)
	if len(rows) != 2*EventRowsPerNetwork {
		t.Fatalf("300 /64s of one /48 and 250 addresses of one /24 wrote %d rows, want %d: one budget each", len(rows), 2*EventRowsPerNetwork)
	}
	if n := count(&b, rows); n != len(batch) {
		t.Fatalf("rows and summaries count %d events, want %d", n, len(batch))
	}

	b = eventBudget{}
	batch = batch[:0]
	for i := range 1000 {
		for range EventRowsPerNetwork {
			batch = append(batch, Event{At: minute, Kind: EventLoginFailed, Source: fmt.Sprintf("10.%d.%d.1", i>>8, i&255)})
		}
	}
	audit := []Event{
		{At: minute, Kind: EventSignedOutEverywhere, Account: "ann@example.com", Detail: map[string]string{"by": "admin:root@example.com"}},
		{At: minute, Kind: EventUnlockConfirmed, Account: "bob@example.com", Source: "10.9.9.1"},
	}
	batch = append(batch, audit...)
	rows = b.admit(batch)
	if len(rows) != EventRowsPerMinute+len(audit) {
		t.Fatalf("a flood from 1000 networks wrote %d rows, want the minute's %d and the %d acts", len(rows), EventRowsPerMinute, len(audit))
	}
	kept := 0
	for _, r := range rows {
		if r.Kind == EventSignedOutEverywhere && r.Detail["by"] == "admin:root@example.com" || r.Kind == EventUnlockConfirmed && r.Account == "bob@example.com" {
			kept++
		}
	}
	if kept != len(audit) {
		t.Fatalf("%d of the %d acts kept as rows with their details", kept, len(audit))
	}
	if n := count(&b, rows); n != len(batch) {
		t.Fatalf("rows and summaries count %d events, want %d", n, len(batch))
	}
}

// TestCoalesceAddsSummaryCounts: a summary that meets rejections of the
// same key in a batch adds its count to theirs.
func TestCoalesceAddsSummaryCounts(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	e := Event{At: at, Kind: EventLoginRejected, Source: "192.0.2.1", Rule: RuleLoginIP}
	sum := e
	sum.Detail = map[string]string{"count": "500", "last": at.Add(time.Minute).Format(time.RFC3339Nano), "folded": "true"}
	out := coalesceRejections([]Event{e, sum, e})
	if len(out) != 1 || eventCount(out[0]) != 502 || out[0].Detail["last"] != sum.Detail["last"] {
		t.Fatalf("coalesced %+v, want one row counting 502, last at the summary's last", out)
	}
}

// TestFactorChangesAreNeverFolded: adding or removing a second factor is
// an owner's act (the password typed again) or an administrator's, and
// mailed to the owner: however many in one minute, each keeps its row,
// with its account and who did it.
func TestFactorChangesAreNeverFolded(t *testing.T) {
	var b eventBudget
	minute := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	var batch []Event
	for i := range 2 * EventRowsPerNetwork {
		at := minute.Add(time.Duration(i) * time.Millisecond)
		batch = append(batch,
			Event{At: at, Kind: EventFactorAdded, Account: "ann@example.com", Source: "192.0.2.1"},
			Event{At: at, Kind: EventFactorRemoved, Account: "ann@example.com", Detail: map[string]string{"by": "admin:root@example.com"}},
		)
	}
	if rows := b.admit(batch); len(rows) != len(batch) {
		t.Fatalf("%d of %d factor changes kept as rows, want all", len(rows), len(batch))
	}
}

// TestBudgetNetwork: an address or a source's prefix counts against its
// IPv4 /24 or IPv6 /48; anything else is its own network.
func TestBudgetNetwork(t *testing.T) {
	for source, want := range map[string]string{
		"192.0.2.7":         "192.0.2.0/24",
		"2001:db8:1:2::/64": "2001:db8:1::/48",
		"2001:db8:1:2::9":   "2001:db8:1::/48",
		"192.0.2.0/24":      "192.0.2.0/24",
		"unknown":           "unknown",
		"not/a-prefix":      "not/a-prefix",
	} {
		if got := budgetNetwork(source); got != want {
			t.Errorf("budgetNetwork(%q) = %q, want %q", source, got, want)
		}
		var b eventBudget
		if got := b.network(source); got != want {
			t.Errorf("network(%q) = %q, want %q", source, got, want)
		}
	}
	var b eventBudget
	b.network("192.0.2.7")
	if got := b.network("198.51.100.7"); got != "198.51.100.0/24" {
		t.Errorf("after another source, network = %q", got)
	}
}

// TestFoldingAllocations: an event folded into its network's summary, the
// fate of every event of a flood past its network's rows, allocates
// nothing.
func TestFoldingAllocations(t *testing.T) {
	if race.Enabled {
		t.Skip("allocation counts under -race are not the build's")
	}
	var b eventBudget
	at := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	batch := []Event{{At: at, Kind: EventLoginRejected, Account: "victim@example.com", Source: "192.0.2.1", Rule: RuleLockout}}
	for range EventRowsPerNetwork + 1 {
		b.admit(batch)
	}
	if n := testing.AllocsPerRun(100, func() { b.admit(batch) }); n > 0 {
		t.Errorf("%v allocations to fold an event, want 0", n)
	}
}

// TestFoldedSummaryKeepsItsApplication: a summary of one application's
// events still names the application (and its key, when named otherwise),
// as each row did; one of several applications' events, or of theirs and
// XCloak's own, names none.
func TestFoldedSummaryKeepsItsApplication(t *testing.T) {
	var b eventBudget
	minute := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	var batch []Event
	for i := range 100 {
		at := minute.Add(time.Duration(i) * time.Millisecond)
		batch = append(batch,
			Event{At: at, Kind: EventLoginRejected, Source: "192.0.2.1", Rule: RuleLoginIP,
				Detail: map[string]string{"app": "shop", "key": "shop-2"}},
			Event{At: at, Kind: EventLoginFailed, Source: "192.0.2.1",
				Detail: map[string]string{"app": []string{"shop", "blog"}[i%2]}},
		)
	}
	b.admit(batch)
	for _, s := range b.close(unixMinute(minute)+1, false) {
		switch s.Kind {
		case EventLoginRejected:
			if s.Detail["app"] != "shop" || s.Detail["key"] != "shop-2" {
				t.Errorf("summary of shop's rejections: detail %v, want app shop, key shop-2", s.Detail)
			}
		case EventLoginFailed:
			if _, ok := s.Detail["app"]; ok {
				t.Errorf("summary of two applications' failures names %q", s.Detail["app"])
			}
		}
	}
}

// TestApplicationsSuccessesAreFolded: the successes an application reports
// through the decision API (a sign-in, a new device, a reset), and its
// reset requests, which its key holder may report at will for any
// account and client, are folded past a network's budget as failures
// are, so that no key fills the log; XCloak's own, which need the
// password or the mailbox, never are.
func TestApplicationsSuccessesAreFolded(t *testing.T) {
	var b eventBudget
	minute := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	var batch []Event
	for i := range 100 {
		at := minute.Add(time.Duration(i) * time.Millisecond)
		app := map[string]string{"app": "shop"}
		batch = append(batch,
			Event{At: at, Kind: EventLoginSucceeded, Account: fmt.Sprintf("app shop u%d", i), Source: "192.0.2.1", Detail: app},
			Event{At: at, Kind: EventNewDevice, Account: fmt.Sprintf("app shop u%d", i), Source: "192.0.2.1", Detail: app},
			Event{At: at, Kind: EventResetCompleted, Account: fmt.Sprintf("app shop u%d", i), Source: "192.0.2.1", Detail: app},
			Event{At: at, Kind: EventResetRequested, Account: fmt.Sprintf("app shop u%d", i), Source: "192.0.2.1", Detail: app},
		)
	}
	own := Event{At: minute.Add(time.Second), Kind: EventLoginSucceeded, Account: "ann@example.com", Source: "192.0.2.1"}
	rows := b.admit(append(batch, own))
	if len(rows) != EventRowsPerNetwork+1 || rows[len(rows)-1].Account != own.Account {
		t.Fatalf("%d rows kept of an application's 400 successes and reset requests and one of XCloak's own; want %d and the own", len(rows), EventRowsPerNetwork+1)
	}
	sums := b.close(unixMinute(minute)+1, false)
	total := len(rows) - 1
	for _, s := range sums {
		total += eventCount(s)
	}
	if len(sums) != 4 || total != len(batch) {
		t.Errorf("%d summaries counting %d events with the rows; want 4 (one per kind) and %d", len(sums), total, len(batch))
	}
	if len(rows)+len(sums) > MaxEventRowsPerNetwork {
		t.Errorf("%d rows and summaries for one network, over MaxEventRowsPerNetwork %d", len(rows)+len(sums), MaxEventRowsPerNetwork)
	}
}

// TestSecondStepSignalsAreNeverFolded: a second step's lock, a right
// password that asked for one, a recovery code used and a copied
// passkey's refusal keep a row each with their account past a network's
// budget, as a password's lockout does: folded with another account's,
// the summary would name neither.
func TestSecondStepSignalsAreNeverFolded(t *testing.T) {
	var b eventBudget
	minute := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	var batch []Event
	for i := range 2 * EventRowsPerNetwork {
		at := minute.Add(time.Duration(i) * time.Millisecond)
		batch = append(batch, Event{At: at, Kind: EventLoginFailed, Source: "192.0.2.1"})
	}
	kinds := []string{EventMFALockout, EventMFARequired, EventRecoveryCodeUsed, EventPasskeyCloned}
	for i, kind := range kinds {
		for _, account := range []string{"ann@example.com", "bob@example.com"} {
			batch = append(batch, Event{At: minute.Add(time.Second + time.Duration(i)*time.Millisecond), Kind: kind,
				Account: account, Source: "192.0.2.2", Rule: RuleMFAAccount})
		}
	}
	rows := b.admit(batch)
	kept := map[string]int{}
	for _, r := range rows {
		if r.Account != "" {
			kept[r.Kind]++
		}
	}
	for _, kind := range kinds {
		if kept[kind] != 2 {
			t.Errorf("%d %s rows kept with their account past the network's budget, want 2", kept[kind], kind)
		}
	}
}

// TestEveryEventKindIsBudgeted: every kind of event the recorder writes
// either keeps a row of its own or folds into a summary that
// MaxEventRowsPerNetwork counts: a refusal by a limit (one per rule, or the
// lockout's), an application's reported success, or a kind that names no
// rule. The kinds are read from the package's own constants, so that a new
// kind cannot be left out of the bound unseen.
func TestEveryEventKindIsBudgeted(t *testing.T) {
	// Written by the attack watch straight to the store, past the
	// recorder and its budget.
	unrecorded := map[string]bool{EventAttackStarted: true, EventAttackEnded: true, EventAttackSwitched: true}
	kinds := testenv.StringConstants(t, ".", "Event")
	if len(kinds) < 40 {
		t.Fatalf("found %d event kinds, want every one of the package's", len(kinds))
	}
	for _, c := range kinds {
		switch kind := c.Value; {
		case individualEvents[kind], unrecorded[kind], strings.HasSuffix(kind, "_rejected"),
			slices.Contains(foldedWithoutRule, kind):
		default:
			t.Errorf("%s (%q) neither keeps a row of its own nor is counted in MaxEventRowsPerNetwork's summaries", c.Name, kind)
		}
	}
}

// TestOwnersActsAreFolded: an owner's acts on the account's sessions and
// devices, which any session of any account may repeat from address after
// address of one network, are folded past its budget as failures are, and
// a summary of one account's acts keeps the account.
func TestOwnersActsAreFolded(t *testing.T) {
	var b eventBudget
	minute := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	var batch []Event
	for i := range 100 {
		at := minute.Add(time.Duration(i) * time.Millisecond)
		source := fmt.Sprintf("2001:db8:0:%x::1", i)
		batch = append(batch,
			Event{At: at, Kind: EventSessionEnded, Account: "mallory@example.com", UserID: 7, Source: source,
				Detail: map[string]string{"by": "owner", "scope": "others", "count": "0"}},
			Event{At: at, Kind: EventDeviceForgotten, Account: "mallory@example.com", UserID: 7, Source: source,
				Detail: map[string]string{"by": "owner"}},
		)
	}
	rows := b.admit(batch)
	if len(rows) != EventRowsPerNetwork {
		t.Fatalf("%d rows kept of one /48's 200 owner's acts, want %d", len(rows), EventRowsPerNetwork)
	}
	sums := b.close(unixMinute(minute)+1, false)
	total := len(rows)
	for _, s := range sums {
		total += eventCount(s)
		if s.Account != "mallory@example.com" || s.UserID != 7 {
			t.Errorf("summary of one account's %s: account %q user %d, want mallory's", s.Kind, s.Account, s.UserID)
		}
	}
	if len(sums) != 2 || total != len(batch) {
		t.Errorf("%d summaries counting %d with the rows; want 2 and %d", len(sums), total, len(batch))
	}
}
