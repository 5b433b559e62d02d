package auth

import (
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"
)

func TestAttemptFingerprint(t *testing.T) {
	a := newAttempts([]byte("0123456789abcdef0123456789abcdef"))
	fp := a.fingerprint("ann@example.com", "old café")
	if len(fp) != 22 {
		t.Fatalf("fingerprint %q: %d characters, want 22 (128 bits, unpadded base64url)", fp, len(fp))
	}
	for _, tc := range []struct {
		name     string
		id, pass string
		same     bool
	}{
		{"the same password again", "ann@example.com", "old café", true},
		// A hash stored before passwords were normalised tells the forms
		// apart: each is a guess of its own.
		{"its decomposed form, another way of typing it", "ann@example.com", "old cafe\u0301", false},
		{"another password", "ann@example.com", "old cafe", false},
		{"the password for another identity", "bob@example.com", "old café", false},
		{"the identity and password joined otherwise", "ann@example.comold", " café", false},
	} {
		if got := a.fingerprint(tc.id, tc.pass); (got == fp) != tc.same {
			t.Errorf("%s: %q, first %q; want same %v", tc.name, got, fp, tc.same)
		}
	}
	if other := newAttempts([]byte("another secret, 32 bytes or more")); other.fingerprint("ann@example.com", "old café") == fp {
		t.Error("another secret gives the same fingerprint")
	}
	// Neither the password nor a plain hash of it shows.
	for _, plain := range []string{"old café", "ann@example.comold café"} {
		sum := sha256.Sum256([]byte(plain))
		if strings.Contains(fp, base64.RawURLEncoding.EncodeToString(sum[:16])) || strings.Contains(fp, plain) {
			t.Errorf("fingerprint %q reveals %q", fp, plain)
		}
	}
}
