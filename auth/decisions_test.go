package auth_test

import (
	"errors"
	"fmt"
	"testing"
	"unicode/utf8"

	"github.com/xcloak/xcloak/auth"
)

// TestFoldAccount: the spellings of a name that applications' lookups
// commonly take for one (case, accents, compatibility and width forms,
// invisible characters, ß) fold to one identity.
func TestFoldAccount(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"Ann@Example.com", "ann@example.com"},
		{"  alice ", "alice"},
		{"álice", "alice"},
		{"ÅLÍCE", "alice"},
		{"a\u0301lice", "alice"}, // the accent as a combining mark
		{"ali\u200bce", "alice"}, // a zero-width space
		{"ali\u00adce", "alice"}, // a soft hyphen
		{"alice\ufe0f", "alice"}, // a variation selector
		{"ａｌｉｃｅ", "alice"},       // full width
		{"straße", "strasse"},    // ß is ss
		{"STRASSE", "strasse"},
		{"Ⅻ", "xii"},           // a compatibility form upper case
		{"J\u030cohn", "john"}, // folded once is ǰ, not idempotent before
		{"ǰohn", "john"},
		{"user_1", "user_1"},
		{"日本語", "日本語"},
		{"한국어", "한국어"},
	} {
		if got := auth.FoldAccount(tc.in); got != tc.want {
			t.Errorf("FoldAccount(%+q) = %+q, want %+q", tc.in, got, tc.want)
		}
	}
}

// FuzzFoldAccount: folding is idempotent, so that a folded identity is
// recognised as one (an administrator's unlock of "app NAME ACCOUNT"),
// and gives valid UTF-8.
func FuzzFoldAccount(f *testing.F) {
	for _, s := range []string{"Ann@Example.com", "J\u030cohn", "Ⅻ", "straße", "a\u0301\u0301", "ﬃ", "İstanbul", "ΣΑΣ", "\u1e9e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		once := auth.FoldAccount(s)
		if twice := auth.FoldAccount(once); twice != once {
			t.Errorf("FoldAccount(%+q) = %+q, folded again %+q", s, once, twice)
		}
		if utf8.ValidString(s) && !utf8.ValidString(once) {
			t.Errorf("FoldAccount(%+q) = %+q, not UTF-8", s, once)
		}
	})
}

// TestAccountSpellingsShareLimits: an application whose lookup takes
// "alice" and "álice" for one account (MySQL's default collation does)
// gets one limit for them from the decision API, not one per spelling.
func TestAccountSpellingsShareLimits(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	_, app, err := f.svc.AddAPIKey(ctx, "shop", "cli")
	if err != nil {
		t.Fatal(err)
	}
	limit := f.cfg.Limits[auth.RuleLoginAccount].Count
	admitted := 0
	for i, account := range []string{"alice", "álice", "ALICE", "àlice", "ali\u200bce", "ａｌｉｃｅ"} {
		for j := range limit {
			// A network of its own each time: only the account's rules
			// are in play.
			_, err := f.svc.Decide(ctx, app, auth.AttemptRequest{Kind: auth.AttemptLogin, Account: account,
				ClientIP: fmt.Sprintf("198.51.%d.%d", i, j+1)})
			switch {
			case err == nil:
				admitted++
			case !errors.Is(err, auth.ErrLimited):
				t.Fatalf("%q: %v", account, err)
			}
		}
	}
	if admitted != limit {
		t.Errorf("six spellings of one account, %d attempts each: %d admitted, want the account's limit, %d", limit, admitted, limit)
	}
}

func BenchmarkFoldAccount(b *testing.B) {
	for _, s := range []string{"ann@example.com", "Ánn.Smith@Example.com"} {
		b.Run(s, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				auth.FoldAccount(s)
			}
		})
	}
}
