package auth

import (
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// MaxEmailBytes is the longest address accepted (RFC 5321's path limit).
const MaxEmailBytes = 254

// ErrInvalidEmail is returned for a string that cannot be an email address.
var ErrInvalidEmail = errors.New("auth: invalid email address")

// NormaliseEmail returns the form an address is stored, limited and looked
// up in: surrounding space trimmed, lower-cased and composed (NFC), so that
// "Ann@Example.com " and "ann@example.com", or an accent typed apart from
// its letter and with it, are one account and one limit. It refuses what
// cannot be an address (no '@', an empty side, spaces, control characters,
// invalid UTF-8, over MaxEmailBytes) with ErrInvalidEmail, and characters
// drawn as nothing (a zero-width space, a direction override: invisible),
// with which an address typed at sign-in would be listed on the dashboard,
// locked out, looking like another account's.
func NormaliseEmail(s string) (string, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if len(s) == 0 || len(s) > MaxEmailBytes || !utf8.ValidString(s) {
		return "", ErrInvalidEmail
	}
	at := strings.LastIndexByte(s, '@')
	if at <= 0 || at == len(s)-1 {
		return "", ErrInvalidEmail
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			// Beyond ASCII the Unicode tables decide, for the rest.
			for _, r := range s[i:] {
				if unfitRune(r) {
					return "", ErrInvalidEmail
				}
			}
			// Composed (NFC): a letter and its combining accent are the
			// composed letter, drawn alike, and so one account.
			if s = norm.NFC.String(s); len(s) > MaxEmailBytes {
				return "", ErrInvalidEmail
			}
			break
		}
		if unfitASCII(c) {
			return "", ErrInvalidEmail
		}
	}
	return s, nil
}

// unfitRune reports whether an address may not hold r: a space, a control
// character, a character drawn as nothing, or the mark of invalid UTF-8.
func unfitRune(r rune) bool {
	return unicode.IsSpace(r) || unicode.IsControl(r) || r == utf8.RuneError || invisible(r) || blank(r)
}

// blank reports whether r is a symbol drawn as nothing, or as a space,
// that the Unicode tables call neither a space nor ignorable: the blank
// braille pattern (U+2800) and the null notehead (U+1D159). Either in an
// address draws it as another's.
func blank(r rune) bool { return r == '\u2800' || r == '\U0001D159' }

// unfitASCII is unfitRune for an ASCII byte, without the tables, which
// cost a flood of sign-ins more than anything else in reading an address:
// of ASCII, only spaces and control characters are unfit.
func unfitASCII(c byte) bool { return c <= ' ' || c == 0x7f }
