package auth_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/auth"
)

// storedEvent is a security_events row as a test compares it: detail as
// its JSON text.
type storedEvent struct {
	kind, account, detail string
	userID                int64
}

// eventsOfKinds lists the rows of kinds, oldest first.
func eventsOfKinds(t *testing.T, f *fixture, kinds ...string) []storedEvent {
	t.Helper()
	rows, err := f.db.Query(t.Context(), `SELECT kind, coalesce(account_key, ''), coalesce(user_id, 0), detail::text
		FROM security_events WHERE kind = ANY($1) ORDER BY id`, kinds)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []storedEvent
	for rows.Next() {
		var e storedEvent
		if err := rows.Scan(&e.kind, &e.account, &e.userID, &e.detail); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCreateUserIsAnEvent: an account created is one user_created event
// naming it, its role and who created it; a creation refused (an address
// that exists, a weak or malformed password) records nothing.
func TestCreateUserIsAnEvent(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	ann, err := f.svc.CreateUser(ctx, "Ann@Example.com", "the right password", true, "cli")
	if err != nil {
		t.Fatal(err)
	}
	bob, err := f.svc.CreateUser(ctx, "bob@example.com", "the right password", false, "admin:ann@example.com")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		email, password string
		want            error
	}{
		{"ann@example.com", "another password", auth.ErrUserExists},
		{"ANN@example.com", "another password", auth.ErrUserExists},
		{"carl@example.com", "short", auth.ErrWeakPassword},
		{"not an address", "the right password", auth.ErrInvalidEmail},
	} {
		if _, err := f.svc.CreateUser(ctx, tc.email, tc.password, true, "cli"); !errors.Is(err, tc.want) {
			t.Errorf("CreateUser(%q, %q): %v, want %v", tc.email, tc.password, err, tc.want)
		}
	}
	if err := f.svc.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got := eventsOfKinds(t, f, auth.EventUserCreated)
	want := []storedEvent{
		{auth.EventUserCreated, "ann@example.com", `{"by": "cli", "role": "admin"}`, ann.ID},
		{auth.EventUserCreated, "bob@example.com", `{"by": "admin:ann@example.com", "role": "member"}`, bob.ID},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("user_created rows:\n got %v\nwant %v", got, want)
	}
}

// TestSetPasswordIsAnEvent: a password set for an account is one
// password_set event naming it and who set it; one refused (no such
// account, a weak password) records nothing.
func TestSetPasswordIsAnEvent(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	ann, err := f.svc.CreateUser(ctx, "ann@example.com", "the right password", true, "cli")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.svc.SetPassword(ctx, "Ann@Example.com", "another password", "dev"); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.SetPassword(ctx, "nobody@example.com", "another password", "dev"); !errors.Is(err, auth.ErrNoUser) {
		t.Errorf("SetPassword of no account: %v, want ErrNoUser", err)
	}
	if err := f.svc.SetPassword(ctx, "ann@example.com", "short", "dev"); !errors.Is(err, auth.ErrWeakPassword) {
		t.Errorf("SetPassword with a short password: %v, want ErrWeakPassword", err)
	}
	if err := f.svc.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got := eventsOfKinds(t, f, auth.EventPasswordSet)
	want := []storedEvent{{auth.EventPasswordSet, "ann@example.com", `{"by": "dev"}`, ann.ID}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("password_set rows:\n got %v\nwant %v", got, want)
	}
}

// TestAPIKeysAreEvents: a key made and a key revoked are one event each,
// api_key_created and api_key_revoked, naming the application and the
// key's id and who did it, never the key nor its hash; an add refused (a
// name in force, a bad name) and a revoke of no key in force record
// nothing.
func TestAPIKeysAreEvents(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	key, info, err := f.svc.AddAPIKey(ctx, "shop", "cli")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.svc.AddAPIKey(ctx, "shop", "cli"); !errors.Is(err, auth.ErrAPIKeyExists) {
		t.Errorf("second AddAPIKey(shop): %v, want ErrAPIKeyExists", err)
	}
	if _, _, err := f.svc.AddAPIKey(ctx, "has space", "cli"); !errors.Is(err, auth.ErrInvalidAPIKeyName) {
		t.Errorf("AddAPIKey(has space): %v, want ErrInvalidAPIKeyName", err)
	}
	if err := f.svc.RevokeAPIKey(ctx, "blog", "cli"); !errors.Is(err, auth.ErrNoAPIKey) {
		t.Errorf("RevokeAPIKey(blog): %v, want ErrNoAPIKey", err)
	}
	if err := f.svc.RevokeAPIKey(ctx, "shop", "admin:root@example.com"); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.RevokeAPIKey(ctx, "shop", "cli"); !errors.Is(err, auth.ErrNoAPIKey) {
		t.Errorf("second RevokeAPIKey(shop): %v, want ErrNoAPIKey", err)
	}
	_, next, err := f.svc.AddAPIKey(ctx, "shop", "cli")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got := eventsOfKinds(t, f, auth.EventAPIKeyCreated, auth.EventAPIKeyRevoked)
	want := []storedEvent{
		{auth.EventAPIKeyCreated, "", fmt.Sprintf(`{"by": "cli", "app": "shop", "key_id": "%d"}`, info.ID), 0},
		{auth.EventAPIKeyRevoked, "", fmt.Sprintf(`{"by": "admin:root@example.com", "app": "shop", "key_id": "%d"}`, info.ID), 0},
		{auth.EventAPIKeyCreated, "", fmt.Sprintf(`{"by": "cli", "app": "shop", "key_id": "%d"}`, next.ID), 0},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("API key rows:\n got %v\nwant %v", got, want)
	}
	// No part of the key that would let anyone find or use it: the key,
	// its random part, its SHA-256 in hex or base64.
	sum := sha256.Sum256([]byte(key))
	secret := strings.TrimPrefix(key, auth.APIKeyPrefix)
	for _, e := range got {
		for _, s := range []string{secret[:8], secret[len(secret)-8:], hex.EncodeToString(sum[:])[:16],
			base64.StdEncoding.EncodeToString(sum[:])[:16]} {
			if strings.Contains(e.detail, s) {
				t.Errorf("%s detail %s holds part of the key or its hash (%q)", e.kind, e.detail, s)
			}
		}
	}
}
