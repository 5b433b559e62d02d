package auth

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"
)

// TestSealedSecrets: a sealed secret opens with its key and account only;
// a plain one opens with or without a key.
func TestSealedSecrets(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	other := bytes.Repeat([]byte{8}, 32)
	secret := []byte("twenty bytes secret!")
	sealed := sealSecret(key, 42, secret)
	if bytes.Contains(sealed, secret) {
		t.Fatal("the sealed secret holds the secret")
	}
	tests := []struct {
		name   string
		key    []byte
		user   int64
		stored []byte
		ok     bool
	}{
		{"sealed, its key and account", key, 42, sealed, true},
		{"sealed, another account", key, 43, sealed, false},
		{"sealed, another key", other, 42, sealed, false},
		{"sealed, no key", nil, 42, sealed, false},
		{"plain, no key", nil, 42, sealSecret(nil, 42, secret), true},
		{"plain, a key set since", key, 42, sealSecret(nil, 42, secret), true},
		{"empty", key, 42, nil, false},
		{"unknown format", key, 42, []byte{9, 1, 2}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := openSecret(tt.key, tt.user, tt.stored)
			if ok := err == nil && bytes.Equal(got, secret); ok != tt.ok {
				t.Errorf("opened %t (%v), want %t", ok, err, tt.ok)
			}
		})
	}
}

// TestMatchTOTP: a code matches its step and the one either side, no
// other, and names the step it is of.
func TestMatchTOTP(t *testing.T) {
	secret := []byte("12345678901234567890")
	now := time.Unix(1_700_000_015, 0)
	cur := totpStep(now)
	for _, d := range []int64{-3, -2, -1, 0, 1, 2, 3} {
		at := time.Unix((cur+d)*30, 0)
		code, err := totp.GenerateCodeCustom(b32.EncodeToString(secret), at, totpOpts)
		if err != nil {
			t.Fatal(err)
		}
		step, ok := matchTOTP(secret, code, now)
		want := d >= -totpSkew && d <= totpSkew
		if ok != want || (ok && step != cur+d) {
			t.Errorf("code of step %+d: matched %t at %d, want %t at %d", d, ok, step, want, cur+d)
		}
	}
}

// TestRecoveryCodes: codes are distinct, read back whatever their case,
// dashes and spaces, and nothing else passes for one.
func TestRecoveryCodes(t *testing.T) {
	codes, hashes := newRecoveryCodes(RecoveryCodes)
	seen := map[string]bool{}
	for i, c := range codes {
		if seen[c] || len(c) != 19 {
			t.Errorf("code %q repeated or of the wrong length", c)
		}
		seen[c] = true
		for _, typed := range []string{c, strings.ToUpper(c), strings.ReplaceAll(c, "-", " "), strings.ReplaceAll(c, "-", "")} {
			n, ok := normaliseRecoveryCode(typed)
			if !ok || !bytes.Equal(recoveryHash(n), hashes[i]) {
				t.Errorf("%q typed as %q is not read back", c, typed)
			}
		}
	}
	for _, bad := range []string{"", "123456", "abcd-efgh-ijkl-mno", "abcd-efgh-ijkl-mno1", "abcd-efgh-ijkl-mnop-q"} {
		if _, ok := normaliseRecoveryCode(bad); ok {
			t.Errorf("%q passes for a recovery code", bad)
		}
	}
}
