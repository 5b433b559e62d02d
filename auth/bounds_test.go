package auth_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/auth"
)

// TestAccountBounds: an account is created at each of auth's field bounds
// and refused one step past it, so the schema's own limits (the users table
// checks the email's length) cannot drift below auth's.
func TestAccountBounds(t *testing.T) {
	f := newFixture(t, nil)
	email := func(n int) string { return strings.Repeat("a", n-len("@example.com")) + "@example.com" }
	const password = "correct horse"
	tests := []struct {
		name, email, password string
		want                  error
	}{
		{"longest email", email(auth.MaxEmailBytes), password, nil},
		{"email one byte too long", email(auth.MaxEmailBytes + 1), password, auth.ErrInvalidEmail},
		{"shortest password", "short@example.com", strings.Repeat("p", auth.MinPasswordRunes), nil},
		{"password one character short", "shorter@example.com", strings.Repeat("p", auth.MinPasswordRunes-1), auth.ErrWeakPassword},
		{"longest password", "long@example.com", strings.Repeat("p", auth.MaxPasswordBytes), nil},
		{"password one byte too long", "longer@example.com", strings.Repeat("p", auth.MaxPasswordBytes+1), auth.ErrWeakPassword},
		// What no form or JSON field may hold (web refuses it before auth
		// sees it) is refused from any other caller too.
		{"password with a NUL byte", "nul@example.com", "correct\x00horse", auth.ErrWeakPassword},
		{"password not UTF-8", "latin1@example.com", "correct horse caf\xe9", auth.ErrWeakPassword},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := f.svc.CreateUser(t.Context(), tt.email, tt.password, false, "cli")
			if !errors.Is(err, tt.want) {
				t.Fatalf("CreateUser = %v, want %v", err, tt.want)
			}
			if tt.want == nil && u.Email != tt.email {
				t.Errorf("stored email = %q, want %q", u.Email, tt.email)
			}
		})
	}
}
