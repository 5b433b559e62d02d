package auth_test

import (
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
)

// TestAdminRemovesConfirmedFactorsOnly: an administrator's removal of an
// account's factors counts, records and mails the factors its owner had,
// not a key the owner began to set up and never confirmed: an account with
// such a key alone had no factor to remove, and its owner is not told
// that an administrator removed every one.
func TestAdminRemovesConfirmedFactorsOnly(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	ann := f.addUser(t, "ann@example.com", "password123", false)
	res, err := f.svc.Login(ctx, auth.LoginRequest{Email: ann.Email, Password: "password123", Client: client("192.0.2.7")})
	if err != nil {
		t.Fatal(err)
	}
	// A key set up and left unconfirmed.
	if _, err := f.svc.BeginTOTP(ctx, res.Session); err != nil {
		t.Fatal(err)
	}
	if n, err := f.svc.RemoveFactors(ctx, "admin:root@example.com", ann.Email); err != nil || n != 0 {
		t.Errorf("removing an account's factors when it has an unconfirmed key alone: %d, %v; want 0 removed", n, err)
	}
	// A confirmed one beside another left unconfirmed.
	enrol, err := f.svc.BeginTOTP(ctx, res.Session)
	if err != nil {
		t.Fatal(err)
	}
	ch := auth.FactorChange{Session: res.Session.Token, Password: "password123", Client: client("192.0.2.7"), DeviceCookie: res.Device.Value}
	if _, err := f.svc.ConfirmTOTP(ctx, ch, enrol.ID, totpAt(t, enrol.Secret, time.Now())); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.BeginTOTP(ctx, res.Session); err != nil {
		t.Fatal(err)
	}
	if n, err := f.svc.RemoveFactors(ctx, "admin:root@example.com", ann.Email); err != nil || n != 1 {
		t.Errorf("removing an account's one factor, another being set up: %d, %v; want 1 removed", n, err)
	}
	if err := f.svc.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	events := eventsOfKinds(t, f, auth.EventFactorRemoved)
	if len(events) != 1 || !strings.Contains(events[0].detail, `"count": "1"`) {
		t.Errorf("factor_removed events: %+v; want one, of 1 factor", events)
	}
}
