package auth

import (
	"testing"
	"unicode/utf8"
)

// TestUnfitASCIIAgreesWithTables: the fast path NormaliseEmail takes for
// ASCII refuses exactly the bytes the Unicode tables refuse.
func TestUnfitASCIIAgreesWithTables(t *testing.T) {
	for c := range byte(utf8.RuneSelf) {
		if got, want := unfitASCII(c), unfitRune(rune(c)); got != want {
			t.Errorf("unfitASCII(%#x) = %v, the tables say %v", c, got, want)
		}
	}
}

// TestNormaliseEmailAfterASCII: an address whose unfit character comes
// after an ASCII start is refused, and a mixed one that is fit is kept,
// so that the fast path hands the rest to the tables.
func TestNormaliseEmailAfterASCII(t *testing.T) {
	for _, s := range []string{"ann@example.com\u00a0x", "ann@ex\u0085ample.com", "ann@é\u200bexample.com", "ann@é\x7fexample.com", "ann@é example.com"} {
		if got, err := NormaliseEmail(s); err != ErrInvalidEmail {
			t.Errorf("NormaliseEmail(%+q) = %+q, %v; want ErrInvalidEmail", s, got, err)
		}
	}
	if got, err := NormaliseEmail(" Ann@Exämple.com\t"); err != nil || got != "ann@exämple.com" {
		t.Errorf("NormaliseEmail = %+q, %v", got, err)
	}
}
