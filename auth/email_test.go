package auth_test

import (
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/xcloak/xcloak/auth"
)

// TestNormaliseEmailRefusesInvisible: an address holding a character
// drawn as nothing is no address: typed at sign-in it would be listed on
// the dashboard, failing and locked, drawn as another account's.
func TestNormaliseEmailRefusesInvisible(t *testing.T) {
	for _, s := range []string{
		"ceo@example.com\u200b",     // a zero-width space
		"\u202emoc.elpmaxe@oec",     // a right-to-left override, drawn as ceo@example.com
		"c\u00adeo@example.com",     // a soft hyphen
		"ceo@example.com\ufe0f",     // a variation selector
		"\ufeffceo@example.com",     // a byte order mark
		"ceo@exam\u2066ple.com",     // a directional isolate
		"ceo\u034f@example.com",     // a combining grapheme joiner
		"ceo\u2800@example.com",     // a blank braille pattern, drawn as a space
		"ceo@\U0001d159example.com", // a null notehead, drawn as nothing
	} {
		if got, err := auth.NormaliseEmail(s); !errors.Is(err, auth.ErrInvalidEmail) {
			t.Errorf("NormaliseEmail(%+q) = %+q, %v; want ErrInvalidEmail", s, got, err)
		}
	}
	for _, s := range []string{"Ann@Example.com", "renée@example.com", "用户@例子.广告"} {
		if _, err := auth.NormaliseEmail(s); err != nil {
			t.Errorf("NormaliseEmail(%+q): %v", s, err)
		}
	}
}

// TestNormaliseEmailComposes: the spellings of an address that Unicode
// holds for one text (an accent composed with its letter, or combining
// after it) are one address, drawn alike: else an attacker's decomposed
// spelling would be listed on the dashboard, failing and locked, as an
// account of its own drawn as the owner's, and the owner's typed so would
// find no account.
func TestNormaliseEmailComposes(t *testing.T) {
	for _, tc := range []struct{ a, b string }{
		{"ren\u00e9e@example.com", "rene\u0301e@example.com"},
		{"\u00c5sa@example.com", "A\u030asa@example.com"},
		{"ann@b\u00fccher.example", "ann@bu\u0308cher.example"},
	} {
		a, errA := auth.NormaliseEmail(tc.a)
		b, errB := auth.NormaliseEmail(tc.b)
		if errA != nil || errB != nil || a != b {
			t.Errorf("NormaliseEmail(%+q) = %+q, %v; NormaliseEmail(%+q) = %+q, %v; want one address", tc.a, a, errA, tc.b, b, errB)
		}
	}
}

// FuzzNormaliseEmail: a normalised address normalises to itself, so that
// an address as stored (and as the dashboard lists it) names its own
// account and limits, and it is valid UTF-8 within MaxEmailBytes.
func FuzzNormaliseEmail(f *testing.F) {
	for _, s := range []string{"Ann@Example.com", "rene\u0301e@example.com", "A\u030asa@example.com",
		"\u212aelvin@example.com", "\u2126@example.com", "İstanbul@example.com", "ΣΑΣ@example.com", "用户@例子.广告"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		once, err := auth.NormaliseEmail(s)
		if err != nil {
			return
		}
		if !utf8.ValidString(once) || len(once) > auth.MaxEmailBytes {
			t.Fatalf("NormaliseEmail(%+q) = %+q: not UTF-8 or too long", s, once)
		}
		if twice, err := auth.NormaliseEmail(once); err != nil || twice != once {
			t.Errorf("NormaliseEmail(%+q) = %+q, normalised again %+q, %v", s, once, twice, err)
		}
	})
}
