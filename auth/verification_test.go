package auth_test

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/auth/authtest"
	"github.com/xcloak/xcloak/ratelimit"
)

// fakeWatch is an AttackWatch whose Active the test sets, and which keeps
// the outcomes it hears.
type fakeWatch struct {
	active atomic.Bool
	mu     sync.Mutex
	seen   []auth.Outcome
}

func (w *fakeWatch) Observe(a auth.SignInAttempt) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, a.Outcome)
}

func (w *fakeWatch) Active() bool { return w.active.Load() }

func (w *fakeWatch) outcomes() []auth.Outcome {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]auth.Outcome(nil), w.seen...)
}

// verifyFixture is authtest's in-memory service with new-device
// verification in mode, a fake attack watch and a clock the test moves.
type verifyFixture struct {
	*authtest.Service
	watch *fakeWatch
	mu    sync.Mutex
	now   time.Time
}

func newVerifyFixture(t *testing.T, mode auth.VerificationMode, configure ...func(*auth.Config)) *verifyFixture {
	t.Helper()
	f := &verifyFixture{watch: &fakeWatch{}, now: time.Now()}
	f.Service = authtest.NewService(t, func(c *auth.Config) {
		c.NewDeviceVerification = mode
		for _, set := range configure {
			set(c)
		}
	}, func(d *auth.Deps) {
		d.Attack = f.watch
		d.Now = f.clock
	})
	return f
}

func (f *verifyFixture) clock() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *verifyFixture) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

// idle waits until the mail workers have handled everything queued.
func (f *verifyFixture) idle(t *testing.T) {
	t.Helper()
	mailIdle(t, f.Service.Service)
}

// mailIdle waits until the mail workers of s have handled everything
// queued.
func mailIdle(t *testing.T, s *auth.Service) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for auth.ResetsPending(s) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("mail jobs still pending after 20 s")
		}
		time.Sleep(time.Millisecond)
	}
}

func (f *verifyFixture) signIn(t *testing.T, email, password, ip, cookie string) (auth.LoginResult, error) {
	t.Helper()
	return f.Login(t.Context(), auth.LoginRequest{Email: email, Password: password, Client: client(ip), DeviceCookie: cookie})
}

var signInLink = regexp.MustCompile(`https://login\.example\.test/sign-in/([A-Za-z0-9_-]{43})`)

// signInToken waits for the sign-in mail to email and returns its token.
func signInToken(t *testing.T, m *authtest.Mailer, email string) string {
	t.Helper()
	match := signInLink.FindStringSubmatch(m.WaitFor(t, email).Body)
	if match == nil {
		t.Fatal("no sign-in link in the mail")
	}
	return match[1]
}

// TestVerificationModes: in each mode, a browser that is not a known
// device tries the right password, a wrong one and an unknown account.
// Where verification applies all three get ErrVerificationRequired and no
// session, and only the owner gets a mail; where it does not, sign-in is
// as before and nobody gets mail. The watch hears each attempt's true
// outcome.
func TestVerificationModes(t *testing.T) {
	for _, tc := range []struct {
		mode   auth.VerificationMode
		attack bool
		held   bool
	}{
		{auth.VerifyNever, false, false},
		{auth.VerifyNever, true, false},
		{auth.VerifyAlways, false, true},
		{auth.VerifyInAttack, false, false},
		{auth.VerifyInAttack, true, true},
	} {
		t.Run(fmt.Sprintf("%s, attack mode %v", tc.mode, tc.attack), func(t *testing.T) {
			f := newVerifyFixture(t, tc.mode)
			f.watch.active.Store(tc.attack)
			u, err := f.CreateUser(t.Context(), "ann@example.com", "the password", false, "cli")
			if err != nil {
				t.Fatal(err)
			}
			_, wrong := f.signIn(t, "ann@example.com", "a wrong password", "192.0.2.1", "")
			_, unknown := f.signIn(t, "nobody@example.com", "the password", "192.0.2.2", "")
			res, right := f.signIn(t, "ann@example.com", "the password", "192.0.2.3", "")
			f.idle(t)
			want := []auth.Outcome{auth.OutcomeFailed, auth.OutcomeUnknownAccount, auth.OutcomeSucceeded}
			if tc.held {
				for name, err := range map[string]error{"right": right, "wrong": wrong, "unknown": unknown} {
					if !errors.Is(err, auth.ErrVerificationRequired) {
						t.Errorf("%s: %v, want ErrVerificationRequired", name, err)
					}
				}
				if res.Session.Token != "" || res.Device.Value != "" || f.Store.Sessions(u.ID) != 0 || f.Store.Devices(u.ID) != 0 {
					t.Errorf("a held sign-in got a session or a device: %+v", res)
				}
				if sent := f.Mail.Sent(); len(sent) != 1 || sent[0].To != "ann@example.com" || !signInLink.MatchString(sent[0].Body) {
					t.Errorf("mail sent: %+v, want one sign-in link to ann", sent)
				}
				want[2] = auth.OutcomeHeld
				if err := f.Flush(t.Context()); err != nil {
					t.Fatal(err)
				}
				kinds := map[string]string{}
				for _, e := range f.Events.Events() {
					kinds[e.Kind] += e.Account + " "
				}
				if kinds[auth.EventVerificationRequired] != "ann@example.com " ||
					kinds[auth.EventLoginFailed] != "ann@example.com nobody@example.com " || kinds[auth.EventLoginSucceeded] != "" {
					t.Errorf("events by kind: %q; want the right password held and the others failed", kinds)
				}
			} else {
				if right != nil || res.Session.Token == "" || f.Store.Sessions(u.ID) != 1 {
					t.Errorf("right password: %v, session %q", right, res.Session.Token)
				}
				if !errors.Is(wrong, auth.ErrInvalidCredentials) || !errors.Is(unknown, auth.ErrInvalidCredentials) {
					t.Errorf("wrong: %v, unknown: %v; want ErrInvalidCredentials", wrong, unknown)
				}
				// The owner hears of the new browser (notify.go), and of
				// nothing else.
				f.idle(t)
				if sent := f.Mail.Sent(); len(sent) != 1 || !strings.HasPrefix(sent[0].Subject, "New sign-in") || signInLink.MatchString(sent[0].Body) {
					t.Errorf("mail sent: %+v, want the new-device notice only", sent)
				}
			}
			if got := f.watch.outcomes(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("outcomes heard %v, want %v", got, want)
			}
		})
	}
}

// TestKnownDeviceNotHeld: a browser that signed in before attack mode
// signs in at once during it, while a new browser with the right password
// is held, and so is one with a forged device cookie.
func TestKnownDeviceNotHeld(t *testing.T) {
	f := newVerifyFixture(t, auth.VerifyInAttack)
	if _, err := f.CreateUser(t.Context(), "ann@example.com", "the password", false, "cli"); err != nil {
		t.Fatal(err)
	}
	before, err := f.signIn(t, "ann@example.com", "the password", "192.0.2.1", "")
	if err != nil {
		t.Fatal(err)
	}
	f.watch.active.Store(true)
	if res, err := f.signIn(t, "ann@example.com", "the password", "192.0.2.1", before.Device.Value); err != nil || res.Session.Token == "" {
		t.Fatalf("known device during attack mode: %v", err)
	}
	if _, err := f.signIn(t, "ann@example.com", "the password", "192.0.2.2", ""); !errors.Is(err, auth.ErrVerificationRequired) {
		t.Fatalf("new browser during attack mode: %v, want ErrVerificationRequired", err)
	}
	forged := "AAAAAAAAAAAAAAAAAAAAAA." + strings.Repeat("A", 43)
	if _, err := f.signIn(t, "ann@example.com", "the password", "192.0.2.3", forged); !errors.Is(err, auth.ErrVerificationRequired) {
		t.Fatalf("forged device cookie during attack mode: %v, want ErrVerificationRequired", err)
	}
}

// TestHeldGuessesCount: held wrong passwords still count towards the
// account's lockout, however like the right password's they are answered:
// after the threshold of them, the right password is refused too.
func TestHeldGuessesCount(t *testing.T) {
	f := newVerifyFixture(t, auth.VerifyAlways, func(c *auth.Config) {
		c.Limits.SetCount(auth.RuleLoginAccount, 1000)
	})
	if _, err := f.CreateUser(t.Context(), "ann@example.com", "the password", false, "cli"); err != nil {
		t.Fatal(err)
	}
	for i := range f.Config.Lockout.Threshold {
		if _, err := f.signIn(t, "ann@example.com", fmt.Sprint("guess ", i), fmt.Sprintf("192.0.2.%d", i+1), ""); !errors.Is(err, auth.ErrVerificationRequired) {
			t.Fatalf("guess %d: %v", i, err)
		}
	}
	if _, err := f.signIn(t, "ann@example.com", "the password", "198.51.100.1", ""); !errors.Is(err, auth.ErrLimited) {
		t.Fatalf("right password after %d held guesses: %v, want ErrLimited", f.Config.Lockout.Threshold, err)
	}
	f.idle(t)
	// The lock mails its owner its notice with an unlock link (notify.go);
	// no wrong guess mails a sign-in link.
	sent := f.Mail.Sent()
	if len(sent) != 1 || !strings.Contains(sent[0].Subject, "locked") || signInLink.MatchString(sent[0].Body) {
		t.Fatalf("wrong guesses mailed the owner: %+v, want the lockout notice only", sent)
	}
}

// TestSignInLink: the mailed link signs in the browser that confirms it,
// with a session and a device cookie that is then a known device; it
// works once; the mail carries a reset link and says the password is
// known to someone if it was not the owner.
func TestSignInLink(t *testing.T) {
	f := newVerifyFixture(t, auth.VerifyAlways)
	u, err := f.CreateUser(t.Context(), "ann@example.com", "the password", false, "cli")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.signIn(t, "ann@example.com", "the password", "192.0.2.1", ""); !errors.Is(err, auth.ErrVerificationRequired) {
		t.Fatal(err)
	}
	body := f.Mail.WaitFor(t, "ann@example.com").Body
	if !strings.Contains(body, "https://login.example.test/password-reset/") || !strings.Contains(body, "your password is known to someone") {
		t.Errorf("the mail offers no reset link or warning:\n%s", body)
	}
	token := signInToken(t, f.Mail, "ann@example.com")
	if email, err := f.CheckSignInToken(t.Context(), token, client("198.51.100.9")); err != nil || email != "ann@example.com" {
		t.Fatalf("CheckSignInToken = %q, %v; want ann@example.com", email, err)
	}
	res, err := f.ConfirmSignIn(t.Context(), token, client("198.51.100.7"), "")
	if err != nil {
		t.Fatalf("ConfirmSignIn: %v", err)
	}
	if sess, err := f.Session(t.Context(), res.Session.Token); err != nil || sess.UserID != u.ID {
		t.Fatalf("the confirming browser's session: %+v, %v", sess, err)
	}
	if res.Device.Name != f.DeviceCookieName("ann@example.com") {
		t.Fatalf("device cookie %q, want the account's", res.Device.Name)
	}
	if _, err := f.ConfirmSignIn(t.Context(), token, client("198.51.100.8"), ""); !errors.Is(err, auth.ErrInvalidToken) {
		t.Fatalf("second use: %v, want ErrInvalidToken", err)
	}
	if _, err := f.CheckSignInToken(t.Context(), token, client("198.51.100.9")); !errors.Is(err, auth.ErrInvalidToken) {
		t.Fatalf("CheckSignInToken after use: %v, want ErrInvalidToken", err)
	}
	if _, err := f.signIn(t, "ann@example.com", "the password", "198.51.100.7", res.Device.Value); err != nil {
		t.Fatalf("the confirmed browser, now a known device: %v", err)
	}
}

// TestSignInLinkRefused: a link is refused once expired, once the
// password has changed since the held sign-in, and when malformed.
func TestSignInLinkRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(t *testing.T, f *verifyFixture)
	}{
		{"expired", func(t *testing.T, f *verifyFixture) { f.advance(f.Config.VerificationTTL + time.Second) }},
		{"password changed", func(t *testing.T, f *verifyFixture) {
			if err := f.SetPassword(t.Context(), "ann@example.com", "another password", "cli"); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newVerifyFixture(t, auth.VerifyAlways)
			u, err := f.CreateUser(t.Context(), "ann@example.com", "the password", false, "cli")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.signIn(t, "ann@example.com", "the password", "192.0.2.1", ""); !errors.Is(err, auth.ErrVerificationRequired) {
				t.Fatal(err)
			}
			token := signInToken(t, f.Mail, "ann@example.com")
			tc.spoil(t, f)
			if _, err := f.CheckSignInToken(t.Context(), token, client("198.51.100.9")); !errors.Is(err, auth.ErrInvalidToken) {
				t.Errorf("CheckSignInToken: %v, want ErrInvalidToken", err)
			}
			if _, err := f.ConfirmSignIn(t.Context(), token, client("198.51.100.7"), ""); !errors.Is(err, auth.ErrInvalidToken) {
				t.Errorf("ConfirmSignIn: %v, want ErrInvalidToken", err)
			}
			if f.Store.Sessions(u.ID) != 0 || f.Store.Devices(u.ID) != 0 {
				t.Error("a refused link left a session or a device")
			}
		})
	}
	f := newVerifyFixture(t, auth.VerifyAlways)
	for _, token := range []string{"", "short", strings.Repeat("!", 43)} {
		if _, err := f.ConfirmSignIn(t.Context(), token, client("198.51.100.7"), ""); !errors.Is(err, auth.ErrInvalidToken) {
			t.Errorf("ConfirmSignIn(%q): %v, want ErrInvalidToken", token, err)
		}
	}
}

// TestVerificationConfig: the service refuses an unknown mode and a
// link lifetime that is not positive.
func TestVerificationConfig(t *testing.T) {
	for _, bad := range []func(*auth.Config){
		func(c *auth.Config) { c.NewDeviceVerification = "sometimes" },
		func(c *auth.Config) { c.VerificationTTL = 0 },
	} {
		cfg := auth.DefaultConfig()
		cfg.Secret = []byte("0123456789abcdef0123456789abcdef")
		cfg.PublicURL = authtest.NewService(t, nil).Config.PublicURL
		bad(&cfg)
		if _, err := auth.NewService(cfg, auth.Deps{}); err == nil || strings.Contains(err.Error(), "required") {
			t.Errorf("NewService with %+v/%v: %v, want a refusal of the setting", cfg.NewDeviceVerification, cfg.VerificationTTL, err)
		}
	}
	for _, s := range []string{"attack", "always", "never"} {
		if m, err := auth.ParseVerificationMode(s); err != nil || string(m) != s {
			t.Errorf("ParseVerificationMode(%q) = %q, %v", s, m, err)
		}
	}
	if _, err := auth.ParseVerificationMode("Always"); err == nil {
		t.Error(`ParseVerificationMode("Always"): no error`)
	}
}

// TestVerificationMetrics: a held right password is a sign-in attempt
// and a held one, neither a success nor a failure; held wrong passwords
// and unknown accounts are failures as always.
func TestVerificationMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := authtest.NewService(t, func(c *auth.Config) { c.NewDeviceVerification = auth.VerifyAlways },
		func(d *auth.Deps) { d.Metrics = reg })
	if _, err := s.CreateUser(t.Context(), "ann@example.com", "the password", false, "cli"); err != nil {
		t.Fatal(err)
	}
	for _, try := range [][2]string{{"ann@example.com", "the password"}, {"ann@example.com", "wrong"}, {"nobody@example.com", "the password"}} {
		if _, err := s.Login(t.Context(), auth.LoginRequest{Email: try[0], Password: try[1], Client: client("192.0.2.1")}); !errors.Is(err, auth.ErrVerificationRequired) {
			t.Fatalf("%v: %v", try, err)
		}
	}
	want := `
# HELP xcloak_signin_attempts_total Sign-in requests received, rejected and malformed ones included.
# TYPE xcloak_signin_attempts_total counter
xcloak_signin_attempts_total 3
# HELP xcloak_signin_failures_total Sign-ins that reached password checking and failed (wrong password or unknown account).
# TYPE xcloak_signin_failures_total counter
xcloak_signin_failures_total 2
# HELP xcloak_signin_held_total Sign-ins with the right password held for new-device verification (a link was mailed).
# TYPE xcloak_signin_held_total counter
xcloak_signin_held_total 1
# HELP xcloak_signin_successes_total Sign-ins that succeeded.
# TYPE xcloak_signin_successes_total counter
xcloak_signin_successes_total 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "xcloak_signin_attempts_total", "xcloak_signin_failures_total",
		"xcloak_signin_held_total", "xcloak_signin_successes_total"); err != nil {
		t.Error(err)
	}
}

// TestHeldMail: the mail of a held right password carries a sign-in link
// and a reset link, and says the password is known to someone if it was
// not the owner; for a breached password it asks for a new one and
// carries no sign-in link.
func TestHeldMail(t *testing.T) {
	s := authtest.NewService(t, nil)
	u, err := s.CreateUser(t.Context(), "ann@example.com", "the password", false, "cli")
	if err != nil {
		t.Fatal(err)
	}
	for _, breached := range []bool{false, true} {
		m, err := auth.HeldMail(t.Context(), s.Service, u, breached)
		if err != nil {
			t.Fatal(err)
		}
		if m.To != "ann@example.com" || !strings.Contains(m.Body, "https://login.example.test/password-reset/") {
			t.Errorf("breached=%v: mail to %s without a reset link:\n%s", breached, m.To, m.Body)
		}
		if got := signInLink.MatchString(m.Body); got == breached {
			t.Errorf("breached=%v: sign-in link in the mail: %v\n%s", breached, got, m.Body)
		}
		want := "your password is known to someone"
		if breached {
			want = "leaked from other sites"
		}
		if !strings.Contains(m.Body, want) {
			t.Errorf("breached=%v: the mail does not say %q:\n%s", breached, want, m.Body)
		}
		if err := m.Validate(); err != nil {
			t.Errorf("breached=%v: %v", breached, err)
		}
	}
}

// TestHeldRightPasswordCounts: a held right password counts towards the
// account's lockout and the password's spraying lock as a wrong one does,
// so neither lock tells whether one of the passwords tried was right: the
// threshold's worth of held tries locks the account, one of them right or
// not, and a password held on enough accounts is refused, right on one of
// them or not. Retyped, it counts once, as a retyped wrong one does.
func TestHeldRightPasswordCounts(t *testing.T) {
	f := newVerifyFixture(t, auth.VerifyAlways, func(c *auth.Config) {
		c.Limits.SetCount(auth.RuleLoginAccount, 1000)
		c.SprayAccounts = 3
	})
	for _, email := range []string{"ann@example.com", "bob@example.com", "cy@example.com"} {
		if _, err := f.CreateUser(t.Context(), email, "shared password", false, "cli"); err != nil {
			t.Fatal(err)
		}
	}
	held := func(email, password, ip string) {
		t.Helper()
		if _, err := f.signIn(t, email, password, ip, ""); !errors.Is(err, auth.ErrVerificationRequired) {
			t.Fatalf("%s, %q: %v, want ErrVerificationRequired", email, password, err)
		}
	}
	threshold := f.Config.Lockout.Threshold
	for range 3 {
		held("ann@example.com", "shared password", "192.0.2.1")
	}
	for i := range threshold - 2 {
		held("ann@example.com", fmt.Sprint("guess ", i), "192.0.2.2")
	}
	held("ann@example.com", "one more guess", "192.0.2.3")
	if _, err := f.signIn(t, "ann@example.com", "shared password", "192.0.2.4", ""); !errors.Is(err, auth.ErrLimited) {
		t.Fatalf("after %d distinct held tries, one of them right and retyped: %v, want ErrLimited", threshold, err)
	}

	// "shared password" has now been held on ann; on bob it is right too,
	// on a third account wrong: three accounts, and it is refused on cy.
	held("bob@example.com", "shared password", "192.0.2.5")
	held("dan@example.com", "shared password", "192.0.2.6")
	if _, err := f.signIn(t, "cy@example.com", "shared password", "192.0.2.7", ""); !errors.Is(err, auth.ErrLimited) {
		t.Fatalf("a password held on %d accounts: %v, want ErrLimited", f.Config.SprayAccounts, err)
	}
}

// TestHeldMailSpendsNoDomainLimit: a held sign-in's mail goes only for the
// right password, so if it spent its recipient domain's mail limit,
// anyone with an account at that domain could tell a right guess from a
// wrong one by whether their own reset mail came after it. Held with the
// right password or a wrong one, the observer's mail comes the same.
func TestHeldMailSpendsNoDomainLimit(t *testing.T) {
	for _, password := range []string{"the password", "a wrong guess"} {
		t.Run(password, func(t *testing.T) {
			f := newVerifyFixture(t, auth.VerifyAlways, func(c *auth.Config) {
				c.Limits[auth.RuleResetDomain] = ratelimit.Limit{Count: 1, Window: time.Minute}
			})
			for _, email := range []string{"ann@example.com", "mallory@example.com"} {
				if _, err := f.CreateUser(t.Context(), email, "the password", false, "cli"); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := f.signIn(t, "ann@example.com", password, "192.0.2.1", ""); !errors.Is(err, auth.ErrVerificationRequired) {
				t.Fatalf("held sign-in: %v", err)
			}
			f.idle(t)
			if err := f.RequestReset(t.Context(), "mallory@example.com", client("198.51.100.1")); err != nil {
				t.Fatal(err)
			}
			f.idle(t)
			for _, m := range f.Mail.Sent() {
				if m.To == "mallory@example.com" {
					return
				}
			}
			t.Fatal("the observer's reset mail was dropped")
		})
	}
}
