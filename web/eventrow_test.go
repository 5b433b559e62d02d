package web

import (
	"testing"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/dashboard"
)

// TestEventRowRareKinds: the rare events a security team must not miss are
// said in words on the event search, not shown as their raw kind.
func TestEventRowRareKinds(t *testing.T) {
	for _, tc := range []struct {
		e          dashboard.StoredEvent
		what, said string
	}{
		{dashboard.StoredEvent{Kind: auth.EventRecoveryCodeUsed, Detail: map[string]string{"left": "7"}},
			"Recovery code used for the second step", "7 left"},
		{dashboard.StoredEvent{Kind: auth.EventPasskeyCloned, Detail: map[string]string{"factor": "3"}},
			"Passkey refused: its signature counter went back", "The authenticator may have been copied"},
	} {
		if row := eventRow(tc.e); row.What != tc.what || row.Detail != tc.said {
			t.Errorf("eventRow(%s) = %q, %q; want %q, %q", tc.e.Kind, row.What, row.Detail, tc.what, tc.said)
		}
	}
}

// TestEventRowNamesTheAdministrator: a lock and a reset link an
// administrator made say who, so that neither reads as the failures'
// lockout or the owner's own request.
func TestEventRowNamesTheAdministrator(t *testing.T) {
	for _, tc := range []struct {
		e          dashboard.StoredEvent
		what, said string
	}{
		{dashboard.StoredEvent{Kind: auth.EventLockout, Detail: map[string]string{"by": "admin:boss@example.com",
			"until": "2026-12-02T18:00:00Z"}},
			"Account locked", "By administrator boss@example.com, until 2 Dec 18:00 UTC"},
		{dashboard.StoredEvent{Kind: auth.EventLockout, Detail: map[string]string{"by": "cli", "until": "2026-12-02T18:00:00Z"}},
			"Account locked", "From the command line, until 2 Dec 18:00 UTC"},
		{dashboard.StoredEvent{Kind: auth.EventLockout, Detail: map[string]string{"level": "2", "until": "2026-12-02T18:00:00Z"}},
			"Account locked", "Level 2, until 2 Dec 18:00 UTC"},
		{dashboard.StoredEvent{Kind: auth.EventResetRequested, Detail: map[string]string{"by": "admin:boss@example.com"}},
			"Password reset requested", "By administrator boss@example.com"},
		{dashboard.StoredEvent{Kind: auth.EventResetRequested},
			"Password reset requested", ""},
		{dashboard.StoredEvent{Kind: auth.EventFactorRemoved, Detail: map[string]string{"by": "cli"}},
			"Second factors removed", "From the command line"},
		{dashboard.StoredEvent{Kind: auth.EventFactorRemoved, Detail: map[string]string{"by": "owner"}},
			"Second factor removed by its owner", ""},
		// A count that is not of events (the factors one act removed, the
		// sessions one ended) is no "times".
		{dashboard.StoredEvent{Kind: auth.EventFactorRemoved, Detail: map[string]string{"by": "admin:boss@example.com", "count": "3"}},
			"Second factors removed", "By administrator boss@example.com"},
		{dashboard.StoredEvent{Kind: auth.EventSessionEnded, Detail: map[string]string{"by": "owner", "scope": "others", "count": "3"}},
			"Signed out everywhere else by its owner", "3 sessions ended"},
		{dashboard.StoredEvent{Kind: auth.EventSignedOutEverywhere, Detail: map[string]string{"by": "admin:boss@example.com"}},
			"Signed out everywhere", "By administrator boss@example.com"},
		{dashboard.StoredEvent{Kind: auth.EventUnlock, Detail: map[string]string{"by": "cli"}},
			"Lockout lifted", "From the command line"},
		{dashboard.StoredEvent{Kind: auth.EventUnlock, Detail: map[string]string{"by": "admin:boss@example.com", "step": auth.SecondStepHeld}},
			"Lock lifted: second step of held sign-ins", "By administrator boss@example.com"},
		{dashboard.StoredEvent{Kind: auth.EventUnlock, Detail: map[string]string{"by": "cli", "step": "a step of another version"}},
			"Lockout lifted", "From the command line"},
	} {
		if row := eventRow(tc.e); row.What != tc.what || row.Detail != tc.said {
			t.Errorf("eventRow(%s %v) = %q, %q; want %q, %q", tc.e.Kind, tc.e.Detail, row.What, row.Detail, tc.what, tc.said)
		}
	}
}

// TestEventRowEveryKind: every kind the event search takes is said in
// words, none shown as its raw kind.
func TestEventRowEveryKind(t *testing.T) {
	for _, kind := range dashboard.SearchKinds {
		// With no detail, and with one of every field some kind has.
		full := map[string]string{"rule": auth.RuleLoginIP, "count": "3", "last": "2026-12-02T17:04:05Z", "app": "shop",
			"device": "new", "factor": "totp", "reason": "queue_full", "link": "unlock", "accounts": "5", "held": "true"}
		for _, detail := range []map[string]string{{}, full} {
			if row := eventRow(dashboard.StoredEvent{Kind: kind, Detail: detail}); row.What == kind || row.What == "" {
				t.Errorf("eventRow(%s %v).What = %q, want words", kind, detail, row.What)
			}
		}
	}
}

// TestEventRowRefusals: a refusal says which limit refused it and, for a
// row that stands for many (a flood's, folded), how many and the last.
func TestEventRowRefusals(t *testing.T) {
	for _, tc := range []struct {
		e          dashboard.StoredEvent
		what, said string
	}{
		{dashboard.StoredEvent{Kind: auth.EventLoginRejected, Detail: map[string]string{"rule": auth.RuleLoginAccount}},
			"Sign-in refused by a limit", "Sign-ins per account"},
		{dashboard.StoredEvent{Kind: auth.EventLoginRejected, Detail: map[string]string{"rule": auth.RuleLockout,
			"count": "1234", "last": "2026-12-02T17:04:05.123Z"}},
			"Sign-in refused by a limit", "Account lockout; 1,234 times, the last at 17:04:05 UTC"},
		{dashboard.StoredEvent{Kind: auth.EventLoginFailed, Detail: map[string]string{"folded": "true",
			"count": "50000", "last": "2026-12-02T17:04:05Z"}},
			"Sign-in failed: wrong password or no such account", "50,000 times, the last at 17:04:05 UTC"},
		{dashboard.StoredEvent{Kind: auth.EventLoginSucceeded, Detail: map[string]string{"app": "shop", "challenged": "true"}},
			"Right password, challenged", "Application shop was told to verify the user another way"},
		{dashboard.StoredEvent{Kind: auth.EventLoginSucceeded, Detail: map[string]string{"factor": "passkey"}},
			"Signed in", "With a passkey"},
		{dashboard.StoredEvent{Kind: auth.EventLoginRejected, Detail: map[string]string{"rule": auth.RuleLoginIP, "app": "shop"}},
			"Sign-in refused by a limit", "Sign-ins per address, asked by application shop"},
		{dashboard.StoredEvent{Kind: auth.EventLoginFailed, Detail: map[string]string{"count": "-3"}},
			"Sign-in failed: wrong password or no such account", ""},
		{dashboard.StoredEvent{Kind: auth.EventResetRejected, Detail: map[string]string{"rule": "a_rule_of_another_version"}},
			"Password reset refused by a limit", "a_rule_of_another_version"},
		{dashboard.StoredEvent{Kind: auth.EventLoginFailed, Detail: map[string]string{"app": "shop"}},
			"Sign-in failed: wrong password or no such account", "Reported by application shop"},
		{dashboard.StoredEvent{Kind: auth.EventLoginFailed, Detail: map[string]string{"app": "shop", "key": "shop-2"}},
			"Sign-in failed: wrong password or no such account", "Reported by application shop (key shop-2)"},
		{dashboard.StoredEvent{Kind: auth.EventAttemptAllowed, Detail: map[string]string{"app": "shop", "key": "shop-2"}},
			"Sign-in allowed for an application", "Asked by application shop (key shop-2)"},
		{dashboard.StoredEvent{Kind: auth.EventLoginSucceeded, Detail: map[string]string{"device": "new", "password": "breached"}},
			"Signed in from a new device", "With a breached password"},
		{dashboard.StoredEvent{Kind: auth.EventResetMailDropped, Detail: map[string]string{"reason": auth.DropQueueFull, "link": "unlock"}},
			"Mail not sent", "An unlock link: the mail queue was full"},
		{dashboard.StoredEvent{Kind: auth.EventPasswordSprayed, Detail: map[string]string{"accounts": "20", "until": "2026-12-02T18:00:00Z"}},
			"Password refused on every account: tried on many", "20 accounts, refused until 2 Dec 18:00 UTC"},
		{dashboard.StoredEvent{Kind: auth.EventMFAFailed, Detail: map[string]string{"kind": "webauthn", "reason": "not verified"}},
			"Passkey refused", "Not verified"},
		{dashboard.StoredEvent{Kind: auth.EventMFAFailed, Detail: map[string]string{"reused": "true", "held": "true"}},
			"Wrong second-step code", "A code used already, on a held sign-in"},
		{dashboard.StoredEvent{Kind: auth.EventMFAFailed, Detail: map[string]string{"kind": "webauthn", "reason": "élan"}},
			"Passkey refused", "Élan"},
		{dashboard.StoredEvent{Kind: auth.EventMFAFailed, Detail: map[string]string{"kind": "webauthn", "reason": "\xff bad"}},
			"Passkey refused", "\xff bad"},
		{dashboard.StoredEvent{Kind: auth.EventLoginUnavailable, Detail: map[string]string{"app": "shop"}},
			"Sign-in not decided", "Its limits or the database could not be reached, or the password checks were full; asked by application shop"},
	} {
		if row := eventRow(tc.e); row.What != tc.what || row.Detail != tc.said {
			t.Errorf("eventRow(%s %v) = %q, %q; want %q, %q", tc.e.Kind, tc.e.Detail, row.What, row.Detail, tc.what, tc.said)
		}
	}
}
