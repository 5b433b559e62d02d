package auth_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/ratelimit"
)

// TestFoldAccount: the spellings of a name that look alike (case,
// compatibility and width forms, invisible characters) fold to one
// identity; accents, which tell names apart, stay.
func TestFoldAccount(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"Ann@Example.com", "ann@example.com"},
		{"  alice ", "alice"},
		{"ali\u200bce", "alice"},    // a zero-width space
		{"ali\u00adce", "alice"},    // a soft hyphen
		{"alice\ufe0f", "alice"},    // a variation selector
		{"\u202eecila", "ecila"},    // a direction override
		{"ａｌｉｃｅ", "alice"},          // full width
		{"Ⅻ", "xii"},                // a compatibility form
		{"Renée", "renée"},          // accents stay
		{"Rene\u0301e", "renée"},    // composed
		{"J\u030cohn", "\u01f0ohn"}, // lower case, then composed: once is enough
		{"ᏣᎳᎩ", "ꮳꮃꭹ"},              // Cherokee, lower case
		{"ΑΝΝΑΣ", "αννασ"},          // a capital sigma
		{"αννας", "αννασ"},          // a final sigma: the same letter
		{"ᾳ", "ᾳ"},                  // an iota subscript stays written so
		{"\u0391\u0345", "ᾳ"},       // composed first, as ᾼ is
		{"ΑΙ", "αι"},
		{"ſ", "s"},             // a long s
		{"alıce", "alice"},     // a dotless i, whose capital is I
		{"ϐϑϕϖϰϱϵ", "βθφπκρε"}, // Greek letters' symbol forms
		{"straße", "straße"},
		{"日本語", "日本語"},
	} {
		if got := auth.FoldAccount(tc.in); got != tc.want {
			t.Errorf("FoldAccount(%+q) = %+q, want %+q", tc.in, got, tc.want)
		}
	}
}

// TestFoldAccountSettles: every code point, alone and before a
// combining mark, folds to something that folds to itself.
func TestFoldAccountSettles(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if r >= 0xd800 && r <= 0xdfff {
			continue
		}
		for _, s := range []string{string(r), string(r) + "\u030c"} {
			once := auth.FoldAccount(s)
			if twice := auth.FoldAccount(once); twice != once {
				t.Fatalf("FoldAccount(%+q) = %+q, folded again %+q", s, once, twice)
			}
		}
	}
}

// FuzzFoldAccount: folding is idempotent, so that a folded identity is
// recognised as one (an administrator's unlock of "app NAME ACCOUNT"),
// and gives valid UTF-8.
func FuzzFoldAccount(f *testing.F) {
	for _, s := range []string{"Ann@Example.com", "J\u030cohn", "Ⅻ", "straße", "a\u0301\u0301", "ﬃ", "İstanbul", "ΣΑΣ", "\u1e9e", "ᏣᎳᎩ"} {
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

// TestAccountSpellingsShareLimits: the decision API gives the spellings
// of one name that look alike one limit, not one each, and a name with
// accents its own; an account too long is refused before it is folded.
func TestAccountSpellingsShareLimits(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	_, app, err := f.svc.AddAPIKey(ctx, "shop", "cli")
	if err != nil {
		t.Fatal(err)
	}
	limit := f.cfg.Limits[auth.RuleLoginAccount].Count
	decide := func(i, j int, account string) error {
		// A network of its own each time: only the account's rules are
		// in play.
		_, err := f.svc.Decide(ctx, app, auth.AttemptRequest{Kind: auth.AttemptLogin, Account: account,
			ClientIP: fmt.Sprintf("198.51.%d.%d", i, j+1)})
		return err
	}
	admitted := 0
	for i, account := range []string{"alice", "ALICE", "ali\u200bce", "ａｌｉｃｅ", " Alice", "alıce"} {
		for j := range limit {
			switch err := decide(i, j, account); {
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
	if err := decide(9, 0, "álice"); err != nil {
		t.Errorf("another name, with an accent: %v", err)
	}
	long := strings.Repeat("\ufdfa", 20_000)
	start := time.Now()
	var fe *auth.FieldError
	if err := decide(9, 1, long); !errors.As(err, &fe) || fe.Field != "account" {
		t.Errorf("an account of %d bytes: %v, want a FieldError for account", len(long), err)
	}
	t.Logf("refused in %s", time.Since(start))
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

// TestAppLocksSetApart: in the in-process store that limits while Redis
// is unreachable, a flood of one application's account locks (a decision
// API key's holder reports failures for accounts it names at will)
// pushes out none of XCloak's own accounts' locks nor another
// application's: the policies set each application's identities apart.
func TestAppLocksSetApart(t *testing.T) {
	const bound = 256
	cfg := auth.DefaultConfig()
	local, err := ratelimit.NewLocal(cfg.LockoutPolicies(), bound, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	lock := func(id string) {
		t.Helper()
		for {
			f, err := local.Fail(ctx, auth.RuleLoginAccount, id, "")
			if err != nil {
				t.Fatal(err)
			}
			if f.LockedNow {
				return
			}
		}
	}
	lock("ann@example.com")
	lock("app other bob")
	for i := range 4 * bound {
		lock(fmt.Sprintf("app shop user%d", i))
	}
	for _, id := range []string{"ann@example.com", "app other bob"} {
		rule := ratelimit.Rule{Name: auth.RuleLoginAccount, ID: id, Limit: ratelimit.PerMinute(1000), Lockable: true}
		if d, err := local.AllowAll(ctx, rule); err != nil || d.Allowed {
			t.Errorf("%s after a flood of one application's locks: %+v, %v; want still locked", id, d, err)
		}
	}
}

// TestAppResetLogsSetApart: in the in-process store, a flood of reset
// decisions for accounts an application names at will (its reset form
// passes on whatever its visitors type, and a key's holder names any
// client address) pushes out none of XCloak's own accounts' reset counts:
// a rule without lockouts sets an application's accounts apart in its
// logs as a lockable one does.
func TestAppResetLogsSetApart(t *testing.T) {
	const bound = 256
	cfg := auth.DefaultConfig()
	local, err := cfg.LocalStore(bound)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	limit := cfg.Limits.Of(auth.RuleResetAccount)
	rule := func(id string) ratelimit.Rule {
		return ratelimit.Rule{Name: auth.RuleResetAccount, ID: id, Limit: limit}
	}
	for range limit.Count {
		if d, err := local.AllowAll(ctx, rule("ann@example.com")); err != nil || !d.Allowed {
			t.Fatalf("ann's reset requests: %+v, %v", d, err)
		}
	}
	for i := range 4 * bound {
		if _, err := local.AllowAll(ctx, rule(fmt.Sprintf("app shop user%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if d, err := local.AllowAll(ctx, rule("ann@example.com")); err != nil || d.Allowed {
		t.Errorf("ann after a flood of an application's reset requests: %+v, %v; want her count still full", d, err)
	}
}
