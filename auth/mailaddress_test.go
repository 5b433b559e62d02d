package auth_test

import (
	"errors"
	"testing"

	"github.com/xcloak/xcloak/auth"
)

// TestAccountAddressIsWhereItsMailGoes: an account is made only for an
// address that mail reads as itself. "ann<eve@evil.test>" is one string
// without spaces or control characters, which an email field takes, but
// a mail to it goes to eve@evil.test: every reset, unlock and sign-in
// link of the account, shown on the dashboard as ann's, would be hers.
func TestAccountAddressIsWhereItsMailGoes(t *testing.T) {
	f := newFixture(t, nil)
	for _, email := range []string{
		"ann<eve@evil.test>",
		"ann@example.com(eve@evil.test)",
		`"eve@evil.test"@example.com`,
	} {
		t.Run(email, func(t *testing.T) {
			if _, err := f.svc.CreateUser(t.Context(), email, "correct horse", false, "cli"); !errors.Is(err, auth.ErrInvalidEmail) {
				t.Fatalf("CreateUser(%q) = %v, want ErrInvalidEmail", email, err)
			}
		})
	}
	for _, email := range []string{"ann@example.com", "zoë+news@exämple.com", "o'brien@example.co.uk"} {
		if _, err := f.svc.CreateUser(t.Context(), email, "correct horse", false, "cli"); err != nil {
			t.Errorf("CreateUser(%q) = %v, want an account", email, err)
		}
	}
}
