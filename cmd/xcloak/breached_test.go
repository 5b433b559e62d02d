package main

import (
	"strings"
	"testing"

	"github.com/xcloak/xcloak/breached/breachedtest"
)

// TestUserAddRefusesBreachedPassword: user add refuses a password the
// breach corpus holds, read from range files or a range API, says why,
// and creates the account with one it does not hold.
func TestUserAddRefusesBreachedPassword(t *testing.T) {
	t.Parallel()
	corpus := breachedtest.New(t)
	corpus.Add(t, "correct horse battery")
	for name, source := range map[string]string{"directory": corpus.Dir, "range API": corpus.Serve(t)} {
		t.Run(name, func(t *testing.T) {
			vars := storeSettings(t)
			vars["XCLOAK_BREACHED_PASSWORDS"] = source
			_, stderr, err := xcloak(t, vars, "correct horse battery\n", "user", "add", "--email", "ann@example.com")
			const want = "password refused: it has appeared in a data breach"
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(stderr, want) {
				t.Fatalf("user add with a breached password: %v, stderr %q; want %q", err, stderr, want)
			}
			if strings.Contains(stderr, "correct horse") {
				t.Errorf("stderr %q shows the password", stderr)
			}
			addUser(t, vars, "ann@example.com", "not in the corpus at all\n")
		})
	}
}
