package auth

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

// TestHeldTokenSeal: a held token opens to what was sealed, only with its
// binding, only before it expires, only under the key it was sealed with,
// and not once a byte of it is changed; its length depends on the
// address's alone, never on the case.
func TestHeldTokenSeal(t *testing.T) {
	k := newHeldKeys(bytes.Repeat([]byte("s"), 32))
	now := time.Unix(1_800_000_000, 0)
	binding, bindingHash := newToken()
	step := func(usable bool, email string, id int64, hash string) heldStep {
		return heldStep{usable: usable, email: email, userID: id, print: k.passwordPrint(hash, 0), bindingHash: bindingHash,
			expires: now.Add(5 * time.Minute), nonce: bytes.Repeat([]byte{7}, heldNonceLen)}
	}
	cases := []heldStep{
		step(true, "ann@example.test", 42, "$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$aGFzaA"),
		step(false, "ann@example.test", 42, "$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$aGFzaA"),
		step(false, "bob@example.test", 0, ""),
	}
	var length int
	for i, h := range cases {
		token := k.seal(h)
		if !IsHeldToken(token) || wellFormedToken(token) {
			t.Fatalf("case %d: a held token (%d characters) taken for a normal one", i, len(token))
		}
		if i == 0 {
			length = len(token)
		} else if len(token) != length {
			t.Errorf("case %d: token of %d characters, the first %d", i, len(token), length)
		}
		got, err := k.open(token, binding, now)
		if err != nil || got.usable != h.usable || got.email != h.email || got.userID != h.userID ||
			!bytes.Equal(got.print, h.print) || !got.expires.Equal(h.expires) || !bytes.Equal(got.nonce, h.nonce) {
			t.Errorf("case %d: opened %+v, %v; sealed %+v", i, got, err, h)
		}
	}
	token := k.seal(cases[0])
	other, _ := newToken()
	raw, _ := base64.RawURLEncoding.DecodeString(token)
	raw[len(raw)/2] ^= 1
	for name, try := range map[string]func() error{
		"another binding": func() error { _, err := k.open(token, other, now); return err },
		"expired":         func() error { _, err := k.open(token, binding, now.Add(5*time.Minute)); return err },
		"another key": func() error {
			_, err := newHeldKeys(bytes.Repeat([]byte("t"), 32)).open(token, binding, now)
			return err
		},
		"a byte changed": func() error { _, err := k.open(base64.RawURLEncoding.EncodeToString(raw), binding, now); return err },
		"too long":       func() error { _, err := k.open(strings.Repeat("A", maxHeldTokenChars+1), binding, now); return err },
	} {
		if err := try(); err != ErrInvalidToken {
			t.Errorf("%s: %v; want ErrInvalidToken", name, err)
		}
	}
	long := step(true, strings.Repeat("a", MaxEmailBytes-len("@example.test"))+"@example.test", 1, "h")
	if token := k.seal(long); len(token) != maxHeldTokenChars {
		t.Errorf("the longest address's token: %d characters; maxHeldTokenChars is %d", len(token), maxHeldTokenChars)
	}
}
