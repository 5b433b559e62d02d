package auth_test

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/auth/authtest"
	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/ratelimit"
)

var unlockLinkRE = regexp.MustCompile(`https://login\.example\.test/unlock/([A-Za-z0-9_-]{43})`)

const firefoxUA = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"

// mailsTo returns the mails the sink holds for to once every queued mail
// job is done.
func mailsTo(t *testing.T, f *fixture, to string) []testenv.Mail {
	t.Helper()
	f.waitResets(t)
	var out []testenv.Mail
	for _, m := range f.mail.Messages() {
		for _, r := range m.To {
			if strings.EqualFold(r, to) {
				out = append(out, m)
			}
		}
	}
	return out
}

// TestNewDeviceNotice: a sign-in from a new browser mails the owner once,
// naming the network and the browser, with a working reset link; the same
// browser signing in again as a known device mails nothing, nor do wrong
// passwords and unknown accounts.
func TestNewDeviceNotice(t *testing.T) {
	f := newFixture(t, nil)
	f.addUser(t, "ann@example.com", "password123", false)
	for _, req := range []auth.LoginRequest{
		{Email: "ann@example.com", Password: "wrong password", Client: client("192.0.2.7")},
		{Email: "nobody@example.com", Password: "password123", Client: client("192.0.2.7")},
	} {
		if _, err := f.svc.Login(t.Context(), req); !errors.Is(err, auth.ErrInvalidCredentials) {
			t.Fatalf("Login(%s, %s): %v, want ErrInvalidCredentials", req.Email, req.Password, err)
		}
	}
	if got := mailsTo(t, f, "ann@example.com"); len(got) != 0 {
		t.Fatalf("%d mails after a wrong password, want none", len(got))
	}
	if got := mailsTo(t, f, "nobody@example.com"); len(got) != 0 {
		t.Fatalf("%d mails to an unknown account", len(got))
	}

	res, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "password123",
		Client: firefox("192.0.2.7")})
	if err != nil {
		t.Fatal(err)
	}
	body := f.mailBody(t, "ann@example.com")
	for _, want := range []string{"new browser", "Firefox on Linux", "network 192.0.2.7", "Not you?"} {
		if !strings.Contains(body, want) {
			t.Errorf("new-device mail lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "Gecko") {
		t.Errorf("new-device mail quotes the User-Agent:\n%s", body)
	}
	m := resetLink.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no reset link in:\n%s", body)
	}
	if err := f.svc.CheckResetToken(t.Context(), m[1], client("198.51.100.21")); err != nil {
		t.Errorf("the mail's reset link: %v", err)
	}

	// The same browser again, now a known device: no second mail.
	if _, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "password123",
		Client: firefox("192.0.2.7"), DeviceCookie: res.Device.Value}); err != nil {
		t.Fatal(err)
	}
	if got := mailsTo(t, f, "ann@example.com"); len(got) != 1 {
		t.Fatalf("%d mails after a new browser and a known one, want 1", len(got))
	}
}

// TestNewDeviceNoticeWithoutUserAgent: no User-Agent, no browser named.
func TestNewDeviceNoticeWithoutUserAgent(t *testing.T) {
	f := newFixture(t, nil)
	f.addUser(t, "ann@example.com", "password123", false)
	if _, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "password123", Client: client("192.0.2.7")}); err != nil {
		t.Fatal(err)
	}
	body := f.mailBody(t, "ann@example.com")
	if !strings.Contains(body, "\n  network 192.0.2.7\n") {
		t.Errorf("mail does not name the network alone:\n%s", body)
	}
}

// TestHeldSignInIsNoNewDevice: a sign-in held for new-device verification
// mails its sign-in link and nothing else, and the browser that follows
// the link is not notified again.
func TestHeldSignInIsNoNewDevice(t *testing.T) {
	f := newFixture(t, func(c *auth.Config) { c.NewDeviceVerification = auth.VerifyAlways })
	f.addUser(t, "ann@example.com", "password123", false)
	if _, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "password123", Client: client("192.0.2.7")}); !errors.Is(err, auth.ErrVerificationRequired) {
		t.Fatalf("held sign-in: %v", err)
	}
	mails := mailsTo(t, f, "ann@example.com")
	if len(mails) != 1 {
		t.Fatalf("%d mails for a held sign-in, want its link only", len(mails))
	}
	m := signInLink.FindStringSubmatch(mails[0].Body)
	if m == nil {
		t.Fatalf("no sign-in link in:\n%s", mails[0].Body)
	}
	if _, err := f.svc.ConfirmSignIn(t.Context(), m[1], client("192.0.2.7"), ""); err != nil {
		t.Fatal(err)
	}
	if got := mailsTo(t, f, "ann@example.com"); len(got) != 1 {
		t.Fatalf("%d mails after the link was confirmed, want still 1", len(got))
	}
}

// TestLockoutNotice: the failure that locks the account mails its owner
// once, with an unlock link that works; failures while it is locked mail
// nothing more, and a lock that comes again is a new lock with its mail.
// An unknown account's lock mails nobody.
func TestLockoutNotice(t *testing.T) {
	f := newFixture(t, func(c *auth.Config) {
		c.Lockout.Threshold = 3
		c.Limits.SetCount(auth.RuleLoginAccount, 1000)
	})
	f.addUser(t, "ann@example.com", "password123", false)
	fail := func(email string, n int) {
		t.Helper()
		for i := range n {
			_, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: email, Password: fmt.Sprint("wrong ", i), Client: client("192.0.2.66")})
			if !errors.Is(err, auth.ErrInvalidCredentials) && !errors.Is(err, auth.ErrLimited) {
				t.Fatalf("failed sign-in %d: %v", i, err)
			}
		}
	}
	fail("ann@example.com", f.cfg.Lockout.Threshold+5)
	fail("nobody@example.com", f.cfg.Lockout.Threshold+5)
	mails := mailsTo(t, f, "ann@example.com")
	if len(mails) != 1 {
		t.Fatalf("%d mails after one lockout, want 1", len(mails))
	}
	if got := mailsTo(t, f, "nobody@example.com"); len(got) != 0 {
		t.Fatalf("%d mails to an unknown account", len(got))
	}
	body := mails[0].Body
	for _, want := range []string{"locked", "network 192.0.2.66"} {
		if !strings.Contains(body, want) {
			t.Errorf("lockout mail lacks %q:\n%s", want, body)
		}
	}
	m := unlockLinkRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no unlock link in:\n%s", body)
	}
	cookie, err := f.svc.ConfirmUnlock(t.Context(), m[1], client("192.0.2.1"))
	if err != nil {
		t.Fatalf("the mail's unlock link: %v", err)
	}
	// The unlocked browser signs in past the lock, as a known device: no
	// new-device mail.
	if _, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "password123",
		Client: client("192.0.2.1"), DeviceCookie: cookie.Value}); err != nil {
		t.Fatalf("sign-in from the unlocked browser: %v", err)
	}
	if got := mailsTo(t, f, "ann@example.com"); len(got) != 1 {
		t.Fatalf("%d mails after the unlocked browser signed in, want still 1", len(got))
	}

	// A new lock after the first ends: a second mail.
	if _, err := f.svc.Unlock(t.Context(), "ann@example.com", "cli"); err != nil {
		t.Fatal(err)
	}
	fail("ann@example.com", f.cfg.Lockout.Threshold)
	if got := mailsTo(t, f, "ann@example.com"); len(got) != 2 {
		t.Fatalf("%d mails after a second lock, want 2", len(got))
	}
}

// TestNotificationsSwitchedOff: with one setting off, its notice is not
// sent and the other two are; with all off, nothing is.
func TestNotificationsSwitchedOff(t *testing.T) {
	subjects := map[string]string{"new device": "New sign-in", "lockout": "are locked", "password change": "was changed"}
	for _, off := range []string{"new device", "lockout", "password change", "all"} {
		t.Run(off, func(t *testing.T) {
			f := newFixture(t, func(c *auth.Config) {
				c.Lockout.Threshold = 3
				c.Limits.SetCount(auth.RuleLoginAccount, 1000)
				c.NotifyNewDevice = off != "new device" && off != "all"
				c.NotifyLockout = off != "lockout" && off != "all"
				c.NotifyPasswordChange = off != "password change" && off != "all"
			})
			f.addUser(t, "ann@example.com", "password123", false)
			f.addUser(t, "bob@example.com", "password123", false)
			res, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "password123", Client: firefox("192.0.2.7")})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.svc.ChangePassword(t.Context(), auth.PasswordChange{Session: res.Session.Token, Current: "password123",
				New: "a new one, nowhere leaked", Client: client("192.0.2.7"), DeviceCookie: res.Device.Value}); err != nil {
				t.Fatal(err)
			}
			for i := range f.cfg.Lockout.Threshold {
				if _, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "bob@example.com", Password: fmt.Sprint("wrong ", i), Client: client("192.0.2.66")}); !errors.Is(err, auth.ErrInvalidCredentials) {
					t.Fatal(err)
				}
			}
			waitEvent(t, f, auth.EventLockout)
			f.waitResets(t)
			got := map[string]int{}
			for _, m := range f.mail.Messages() {
				for kind, subject := range subjects {
					if strings.Contains(m.Subject, subject) {
						got[kind]++
					}
				}
			}
			for kind := range subjects {
				want := 1
				if off == kind || off == "all" {
					want = 0
				}
				if got[kind] != want {
					t.Errorf("%d %s notices with %s off, want %d", got[kind], kind, off, want)
				}
			}
			if n := len(f.mail.Messages()); n != got["new device"]+got["lockout"]+got["password change"] {
				t.Errorf("%d mails, %v of them notices", n, got)
			}
		})
	}
}

func TestNoticeBrowser(t *testing.T) {
	for _, c := range []struct{ ua, want string }{
		{firefoxUA, "Firefox on Linux"},
		{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0", "Edge on Windows"},
		{"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15", "Safari on macOS"},
		{"Mozilla/5.0 (Linux; Android 14) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36", "Chrome on Android"},
		{"Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/131.0 Mobile/15E148 Safari/604.1", "Chrome on iPhone"},
		{"curl/8.5.0", "curl"},
		{"", ""},
		{"Click http://evil.example/ to keep your account", ""},
	} {
		if got := auth.NoticeBrowser(c.ua); got != c.want {
			t.Errorf("NoticeBrowser(%q) = %q, want %q", c.ua, got, c.want)
		}
	}
}

// firefox is a client at ip whose browser says it is Firefox on Linux.
func firefox(ip string) auth.Client {
	c := client(ip)
	c.UserAgent = firefoxUA
	return c
}

// TestOwnerNoticesOutsideTheDomainLimit: the notices that follow a proof
// of the password (a new device, a changed password, a factor) are not
// counted against the recipient domain's limit of mails, which anyone can
// spend by asking for reset links of its accounts: whoever took an account
// over could otherwise silence the mails that tell its owner.
func TestOwnerNoticesOutsideTheDomainLimit(t *testing.T) {
	f := newFixture(t, func(c *auth.Config) {
		c.Limits[auth.RuleResetDomain] = ratelimit.Limit{Count: 2, Window: time.Minute}
	})
	f.addUser(t, "ann@corp.example", "password123", false)
	for _, email := range []string{"a@corp.example", "b@corp.example", "c@corp.example"} {
		f.addUser(t, email, "old password", false)
		if err := f.svc.RequestReset(t.Context(), email, client("192.0.2.1")); err != nil {
			t.Fatal(err)
		}
	}
	f.waitResets(t)
	if n := len(f.mail.Messages()); n != 2 {
		t.Fatalf("%d reset links sent to corp.example, want its limit of 2", n)
	}
	res, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@corp.example", Password: "password123", Client: firefox("192.0.2.7")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.ChangePassword(t.Context(), auth.PasswordChange{Session: res.Session.Token, Current: "password123",
		New: "a new one, nowhere leaked", Client: client("192.0.2.7"), DeviceCookie: res.Device.Value}); err != nil {
		t.Fatal(err)
	}
	f.waitResets(t)
	var subjects []string
	for _, m := range mailsTo(t, f, "ann@corp.example") {
		subjects = append(subjects, m.Subject)
	}
	if len(subjects) != 2 {
		t.Fatalf("ann was mailed %q; want the new device's notice and the changed password's", subjects)
	}
}

// TestOwnerNoticesBoundedPerAccount: outside the domain's limit, the
// new-device notices are bounded per account (notice_account), whatever
// makes them: one credential, a passkey signing in from ever new
// networks, cannot flood its owner's mailbox or the mail relay.
func TestOwnerNoticesBoundedPerAccount(t *testing.T) {
	f := newFixture(t, func(c *auth.Config) {
		c.Limits[auth.RuleNoticeAccount] = ratelimit.Limit{Count: 2, Window: time.Hour}
		c.Limits.SetCount(auth.RuleLoginAccount, 1000)
	})
	f.addUser(t, "ann@corp.example", "password123", false)
	for i := range 4 {
		if _, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@corp.example", Password: "password123",
			Client: firefox(fmt.Sprintf("2001:db8:1:%x::1", i))}); err != nil {
			t.Fatal(err)
		}
	}
	if got := mailsTo(t, f, "ann@corp.example"); len(got) != 2 {
		t.Fatalf("%d notices after 4 sign-ins from new devices, want notice_account's 2", len(got))
	}
}

// TestChangeNoticeOutlivesTheNewDeviceNotices: the new-device notices that
// one credential makes in bulk cannot spend what the notice of a changed
// password needs (each kind is counted apart): whoever signs in from new devices until their notices
// are dropped, then changes the password, is still reported to the owner,
// with the one link the change leaves working.
func TestChangeNoticeOutlivesTheNewDeviceNotices(t *testing.T) {
	f := newFixture(t, func(c *auth.Config) {
		c.Limits[auth.RuleNoticeAccount] = ratelimit.Limit{Count: 2, Window: time.Hour}
		c.Limits.SetCount(auth.RuleLoginAccount, 1000)
	})
	f.addUser(t, "ann@corp.example", "password123", false)
	var last auth.LoginResult
	for i := range 3 {
		res, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@corp.example", Password: "password123",
			Client: firefox(fmt.Sprintf("2001:db8:1:%x::1", i))})
		if err != nil {
			t.Fatal(err)
		}
		last = res
	}
	f.waitResets(t)
	if _, err := f.svc.ChangePassword(t.Context(), auth.PasswordChange{Session: last.Session.Token, Current: "password123",
		New: "the attacker's own, nowhere leaked", Client: client("192.0.2.7"), DeviceCookie: last.Device.Value}); err != nil {
		t.Fatal(err)
	}
	for _, m := range mailsTo(t, f, "ann@corp.example") {
		if strings.Contains(m.Subject, "was changed") {
			return
		}
	}
	t.Fatal("the owner was not told of the change: the new-device notices spent its budget")
}

// TestFactorNoticesBoundedPerAccount: the notices of second factors, which
// one password can make again and again from each known device (recovery
// codes made again), are bounded per account too, apart from the other
// kinds'.
func TestFactorNoticesBoundedPerAccount(t *testing.T) {
	f := newFixture(t, func(c *auth.Config) {
		c.Limits[auth.RuleNoticeAccount] = ratelimit.Limit{Count: 2, Window: time.Hour}
	})
	ctx := t.Context()
	f.addUser(t, "pat@example.com", "password123", false)
	c := firefox("192.0.2.10")
	res, err := f.svc.Login(ctx, auth.LoginRequest{Email: "pat@example.com", Password: "password123", Client: c})
	if err != nil {
		t.Fatal(err)
	}
	ch := auth.FactorChange{Session: res.Session.Token, Password: "password123", Client: c, DeviceCookie: res.Device.Value}
	k := authtest.NewSoftKey(t)
	pc, err := f.svc.BeginPasskey(ctx, res.Session, c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.FinishPasskey(ctx, ch, pc.Binding, "Laptop", []byte(k.Create(t, optionsJSON(t, pc)))); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if _, err := f.svc.RegenerateRecoveryCodes(ctx, ch); err != nil {
			t.Fatal(err)
		}
	}
	kinds := map[string]int{}
	for _, m := range mailsTo(t, f, "pat@example.com") {
		kinds[m.Subject]++
	}
	factor := 0
	for subject, n := range kinds {
		if !strings.HasPrefix(subject, "New sign-in") {
			factor += n
		}
	}
	if factor != 2 || len(kinds) < 2 {
		t.Fatalf("mails %v: want the new device's notice and notice_account's 2 of the factors'", kinds)
	}
}
