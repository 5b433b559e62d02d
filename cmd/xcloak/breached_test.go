package main

import (
	"path/filepath"
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

// TestOnlyUserAddReadsTheBreachCorpus: of the user and apikey commands
// only user add sets a password, and only it opens the breach corpus.
// The others, an unlock, a disabling or a key's revocation in an
// incident, run whatever state the corpus is in: a directory gone with
// its mount stops none of them (nor would one that hangs, whose check at
// start would hold them with it).
func TestOnlyUserAddReadsTheBreachCorpus(t *testing.T) {
	t.Parallel()
	vars := storeSettings(t)
	addUser(t, vars, "ann@example.com", "correct horse battery\n")
	vars["XCLOAK_BREACHED_PASSWORDS"] = filepath.Join(t.TempDir(), "gone")
	if _, stderr, err := xcloak(t, vars, "another good password\n", "user", "add", "--email", "bob@example.com"); err == nil ||
		!strings.Contains(stderr, "XCLOAK_BREACHED_PASSWORDS") {
		t.Fatalf("user add with the corpus gone: %v, stderr %q; want it refused, naming XCLOAK_BREACHED_PASSWORDS", err, stderr)
	}
	for _, args := range [][]string{
		{"user", "unlock", "--email", "ann@example.com"},
		{"user", "signout", "--email", "ann@example.com"},
		{"user", "list"},
		{"user", "disable", "--email", "ann@example.com"},
		{"apikey", "add", "--name", "shop"},
		{"apikey", "revoke", "--name", "shop"},
	} {
		if _, stderr, err := xcloak(t, vars, "", args...); err != nil {
			t.Errorf("%v with the corpus gone: %v\n%s", args, err, stderr)
		}
	}
}
