package dashboard_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/dashboard"
	"github.com/xcloak/xcloak/internal/testenv"
)

// authEventKinds reads every event kind package auth declares: the
// string constants named Event... of its non-test files.
func authEventKinds(t *testing.T) []string {
	t.Helper()
	var kinds []string
	for _, c := range testenv.StringConstants(t, "../auth", "Event") {
		kinds = append(kinds, c.Value)
	}
	if len(kinds) < 40 {
		t.Fatalf("found %d event kinds in package auth, want them all: %v", len(kinds), kinds)
	}
	slices.Sort(kinds)
	return kinds
}

// TestSearchKindsAreEveryKind: the event search knows every kind package
// auth declares, each once, and no other, so that a new kind cannot be
// recorded and then not be found.
func TestSearchKindsAreEveryKind(t *testing.T) {
	want := authEventKinds(t)
	got := slices.Clone(dashboard.SearchKinds)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		var missing, extra []string
		for _, k := range want {
			if !slices.Contains(got, k) {
				missing = append(missing, k)
			}
		}
		for _, k := range got {
			if !slices.Contains(want, k) {
				extra = append(extra, k)
			}
		}
		t.Errorf("SearchKinds lacks %v and has %v besides package auth's kinds (or holds one twice)", missing, extra)
	}
}

// searchStore records the searches it is given.
type searchStore struct {
	dashboard.Store
	got []dashboard.EventSearch
}

func (s *searchStore) SearchEvents(_ context.Context, q dashboard.EventSearch, _ func(dashboard.StoredEvent) error) error {
	s.got = append(s.got, q)
	return nil
}

// TestSearchEventsGivesTheStoreAParsedNetwork: the store compares the
// network as an inet, so a search not built by ParseEventSearch reaches
// it parsed, or is refused as a bad field (a 400) rather than failing the
// query (a 500).
func TestSearchEventsGivesTheStoreAParsedNetwork(t *testing.T) {
	for network, want := range map[string]string{
		"2001:db8:7:1::99":       "2001:db8:7:1::/64",
		"203.0.113.9/24":         "203.0.113.0/24",
		"::ffff:203.0.113.0/120": "203.0.113.0/24",
		"::ffff:203.0.113.7":     "203.0.113.7",
		"::ffff:0.0.0.0/96":      "0.0.0.0/0",
		"::ffff:203.0.113.7/128": "203.0.113.7",
		"203.0.113.7/32":         "203.0.113.7",
		"2001:db8::1/128":        "2001:db8::1",
		"64:ff9b::203.0.113.7":   "203.0.113.7",
		"2002:cb00:7107:1::9":    "2002:cb00:7107:1::/64",
		"unknown":                "",
		"203.0.113.0/33":         "",
		"fe80::1%eth0/64":        "",
	} {
		store := &searchStore{}
		r := dashboard.New(nil, store, nil, nil, nil, nil)
		err := r.SearchEvents(t.Context(), dashboard.EventSearch{Network: network, Limit: 1}, nil)
		var field *auth.FieldError
		switch {
		case want == "" && (!errors.As(err, &field) || field.Field != "network" || len(store.got) != 0):
			t.Errorf("%s: %v, store given %v; want a network field error", network, err, store.got)
		case want != "" && (err != nil || len(store.got) != 1 || store.got[0].Network != want):
			t.Errorf("%s: %v, store given %v; want %s", network, err, store.got, want)
		}
	}
}

// TestEventKindsListAdministratorsActs: the dashboard's latest events,
// which already list an administrator's unlock, sign-out everywhere and
// attack-mode switch, list every other act of account and key
// administration too, so that an account promoted to administrator or a
// key made shows where the security team looks first.
func TestEventKindsListAdministratorsActs(t *testing.T) {
	for _, kind := range []string{
		auth.EventUserCreated, auth.EventUserDisabled, auth.EventUserEnabled, auth.EventUserDeleted,
		auth.EventUserPromoted, auth.EventUserDemoted, auth.EventPasswordSet, auth.EventFactorRemoved,
		auth.EventAPIKeyCreated, auth.EventAPIKeyRevoked, auth.EventEventsExported,
		auth.EventUnlock, auth.EventSignedOutEverywhere, auth.EventAttackSwitched,
	} {
		if !slices.Contains(dashboard.EventKinds, kind) {
			t.Errorf("EventKinds lacks %s", kind)
		}
	}
}

// slowStore searches until its caller gives up.
type slowStore struct{ dashboard.Store }

func (slowStore) SearchEvents(ctx context.Context, _ dashboard.EventSearch, _ func(dashboard.StoredEvent) error) error {
	<-ctx.Done()
	return fmt.Errorf("%w: searching events: %w", auth.ErrUnavailable, ctx.Err())
}

// TestSearchEventsBounded: a search that runs past its time (a network
// as wide as 0.0.0.0/0, whose every event the store sorts) is cut there,
// and answered as a network too wide to search, not as Postgres being
// down; a search whose reader left is cut as before.
func TestSearchEventsBounded(t *testing.T) {
	r := dashboard.New(nil, slowStore{}, nil, nil, nil, nil)
	dashboard.SetSearchTimeout(r, 50*time.Millisecond)
	// Bounded here too, so that a search that is not bounded fails the
	// test rather than hangs it.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	start := time.Now()
	err := r.SearchEvents(ctx, dashboard.EventSearch{Network: "0.0.0.0/0", Limit: 1}, nil)
	var field *auth.FieldError
	if !errors.As(err, &field) || field.Field != "network" {
		t.Errorf("a network search past its time: %v, want a network field error", err)
	}
	if took := time.Since(start); took >= 5*time.Second {
		t.Errorf("the search took %s", took)
	}
	err = r.SearchEvents(ctx, dashboard.EventSearch{Kind: dashboard.SearchKinds[0], Limit: 1}, nil)
	if !errors.Is(err, auth.ErrUnavailable) {
		t.Errorf("a search without a network past its time: %v, want ErrUnavailable", err)
	}
	gone, leave := context.WithCancel(t.Context())
	leave()
	if err := r.SearchEvents(gone, dashboard.EventSearch{Network: "10.0.0.0/8", Limit: 1}, nil); errors.As(err, &field) {
		t.Errorf("a search whose reader left: %v, want no field error", err)
	}
}
