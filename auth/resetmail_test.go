package auth_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/dashboard"
	"github.com/xcloak/xcloak/internal/app"
	"github.com/xcloak/xcloak/ratelimit"
)

// slowMailer stands for a slow mail server in front of the real SMTP sink:
// a Send waits until the mailer is released (or its context ends) before
// it goes through, and the mailer tracks how many wait at once.
type slowMailer struct {
	next auth.Mailer
	// domain, if set, is the only recipient domain that is slow.
	domain string

	mu       sync.Mutex
	release  chan struct{} // closed while sends go through
	inFlight int
	most     int
	changed  chan struct{} // closed and replaced when inFlight changes
}

func newSlowMailer(next auth.Mailer) *slowMailer {
	return &slowMailer{next: next, release: make(chan struct{}), changed: make(chan struct{})}
}

func (m *slowMailer) Send(ctx context.Context, msg auth.Message) error {
	if m.domain != "" && !strings.HasSuffix(msg.To, "@"+m.domain) {
		return m.next.Send(ctx, msg)
	}
	m.add(1)
	defer m.add(-1)
	m.mu.Lock()
	release := m.release
	m.mu.Unlock()
	select {
	case <-release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return m.next.Send(ctx, msg)
}

func (m *slowMailer) add(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inFlight += n
	m.most = max(m.most, m.inFlight)
	close(m.changed)
	m.changed = make(chan struct{})
}

// hold makes sends wait from now on; let lets them go through.
func (m *slowMailer) hold() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.release = make(chan struct{})
}

func (m *slowMailer) let() {
	m.mu.Lock()
	defer m.mu.Unlock()
	close(m.release)
}

// waitInFlight waits until n sends are held at once.
func (m *slowMailer) waitInFlight(t *testing.T, n int) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		m.mu.Lock()
		in, changed := m.inFlight, m.changed
		m.mu.Unlock()
		if in >= n {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("%d mails being sent at once, want %d", in, n)
		}
	}
}

// TestResetMailsSentInParallel: while the mail server is slow, several
// reset mails (to different domains) are sent at once, and all of them
// arrive.
func TestResetMailsSentInParallel(t *testing.T) {
	var slow *slowMailer
	f := newFixture(t, func(c *auth.Config) {
		c.Limits[auth.RuleResetIP] = ratelimit.Limit{Count: 100, Window: time.Minute}
	}, func(d *app.Deps) { slow = newSlowMailer(d.Mailer); d.Mailer = slow })
	const users = 8
	for i := range users {
		email := fmt.Sprintf("user%d@domain%d.example", i, i)
		f.addUser(t, email, "old password", false)
		if err := f.svc.RequestReset(t.Context(), email, client("192.0.2.1")); err != nil {
			t.Fatal(err)
		}
	}
	slow.waitInFlight(t, 4)
	slow.let()
	for i := range users {
		f.mail.WaitFor(t, fmt.Sprintf("user%d@domain%d.example", i, i))
	}
	slow.mu.Lock()
	defer slow.mu.Unlock()
	t.Logf("at most %d mails were being sent at once", slow.most)
}

// TestSlowDomainDoesNotHoldEveryWorker: while one recipient domain's mail
// server holds every mail sent to it, half the workers at most are held
// by it, and mail to other domains still goes out.
func TestSlowDomainDoesNotHoldEveryWorker(t *testing.T) {
	var slow *slowMailer
	f := newFixture(t, func(c *auth.Config) {
		c.Limits[auth.RuleResetIP] = ratelimit.Limit{Count: 100, Window: time.Minute}
	}, func(d *app.Deps) { slow = newSlowMailer(d.Mailer); slow.domain = "slow.example"; d.Mailer = slow })
	for i := range 6 {
		email := fmt.Sprintf("user%d@slow.example", i)
		f.addUser(t, email, "old password", false)
		if err := f.svc.RequestReset(t.Context(), email, client("192.0.2.1")); err != nil {
			t.Fatal(err)
		}
	}
	slow.waitInFlight(t, 2)
	f.addUser(t, "ann@fast.example", "old password", false)
	if err := f.svc.RequestReset(t.Context(), "ann@fast.example", client("192.0.2.1")); err != nil {
		t.Fatal(err)
	}
	f.mail.WaitFor(t, "ann@fast.example")
	slow.let()
	for i := range 6 {
		f.mail.WaitFor(t, fmt.Sprintf("user%d@slow.example", i))
	}
	f.waitResets(t)
	slow.mu.Lock()
	defer slow.mu.Unlock()
	if slow.most != 2 {
		t.Fatalf("%d mails to the slow domain were being sent at once, want 2 (half the workers)", slow.most)
	}
}

// TestUnknownAddressesDoNotWaitForASlowDomain: requests for addresses
// without an account, which anyone makes at will, are mailed nothing and
// take no place among the mails waiting for a busy domain: a flood of
// them while its mail server is slow does not drop the mail of an account
// there that asks after them.
func TestUnknownAddressesDoNotWaitForASlowDomain(t *testing.T) {
	var slow *slowMailer
	f := newFixture(t, func(c *auth.Config) {
		c.Limits[auth.RuleResetIP] = ratelimit.Limit{Count: 5000, Window: time.Minute}
		c.Limits[auth.RuleResetNetwork] = ratelimit.Limit{Count: 5000, Window: time.Minute}
	}, func(d *app.Deps) { slow = newSlowMailer(d.Mailer); slow.domain = "slow.example"; d.Mailer = slow })
	for i := range 3 {
		f.addUser(t, fmt.Sprintf("user%d@slow.example", i), "old password", false)
	}
	for i := range 2 {
		if err := f.svc.RequestReset(t.Context(), fmt.Sprintf("user%d@slow.example", i), client("192.0.2.1")); err != nil {
			t.Fatal(err)
		}
	}
	slow.waitInFlight(t, 2)
	for i := range 1024 + 8 {
		if err := f.svc.RequestReset(t.Context(), fmt.Sprintf("nobody%d@slow.example", i), client("192.0.2.2")); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.svc.RequestReset(t.Context(), "user2@slow.example", client("192.0.2.1")); err != nil {
		t.Fatal(err)
	}
	slow.let()
	if len(mailsTo(t, f, "user2@slow.example")) == 0 {
		t.Fatal("the reset mail of user2@slow.example, asked for after a flood of unknown addresses of its domain, was dropped")
	}
}

// TestResetMailsDroppedAreCounted: a recipient domain over its limit, and
// a full queue, drop mails; each drop is counted in the metrics and on the
// dashboard, by reason, and the other domains' mails still go out.
func TestResetMailsDroppedAreCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	var slow *slowMailer
	f := newFixture(t, func(c *auth.Config) {
		c.Limits[auth.RuleResetIP] = ratelimit.Limit{Count: 5000, Window: time.Minute}
		c.Limits[auth.RuleResetNetwork] = ratelimit.Limit{Count: 5000, Window: time.Minute}
		c.Limits[auth.RuleResetDomain] = ratelimit.Limit{Count: 2, Window: time.Minute}
	}, func(d *app.Deps) {
		d.Metrics = reg
		slow = newSlowMailer(d.Mailer)
		d.Mailer = slow
	})
	slow.let()
	for _, email := range []string{"a@busy.example", "b@busy.example", "c@busy.example", "d@other.example"} {
		f.addUser(t, email, "old password", false)
		if err := f.svc.RequestReset(t.Context(), email, client("192.0.2.1")); err != nil {
			t.Fatal(err)
		}
	}
	f.waitResets(t)
	f.mail.WaitFor(t, "d@other.example")
	sent := map[string]int{}
	for _, m := range f.mail.Messages() {
		for _, to := range m.To {
			sent[to[strings.IndexByte(to, '@')+1:]]++
		}
	}
	if sent["busy.example"] != 2 || sent["other.example"] != 1 {
		t.Fatalf("mails sent by domain: %v; want 2 to busy.example (its limit) and 1 to other.example", sent)
	}

	// Hold every worker, fill the queue, and ask once more.
	slow.hold()
	for i := range 4 {
		email := fmt.Sprintf("held%d@held%d.example", i, i)
		f.addUser(t, email, "old password", false)
		if err := f.svc.RequestReset(t.Context(), email, client("192.0.2.2")); err != nil {
			t.Fatal(err)
		}
	}
	slow.waitInFlight(t, 4)
	for i := range 1024 + 3 {
		if err := f.svc.RequestReset(t.Context(), fmt.Sprintf("queued%d@example.com", i), client("192.0.2.3")); err != nil {
			t.Fatal(err)
		}
	}
	slow.let()
	f.waitResets(t)

	want := `
# HELP xcloak_reset_mails_dropped_total Link mails and notices that were not sent, by reason: queue_full, domain_limit, account_limit, send_failed, unavailable.
# TYPE xcloak_reset_mails_dropped_total counter
xcloak_reset_mails_dropped_total{reason="domain_limit"} 1
xcloak_reset_mails_dropped_total{reason="queue_full"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "xcloak_reset_mails_dropped_total"); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	sum, err := f.counters.Summary(t.Context(), dashboard.Period5m, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if sum.MailsDropped != 4 {
		t.Fatalf("dashboard: %d reset mails dropped, want 4", sum.MailsDropped)
	}
	if n := countRows(t, f, `SELECT count(*) FROM security_events WHERE kind = 'reset_mail_dropped'`); n != 4 {
		t.Fatalf("%d reset_mail_dropped events stored, want 4", n)
	}
}

// TestUnlockMailsShareTheDomainLimit: unlock links go through the same
// senders and the same per-domain limit as reset links, so asking for
// both kinds cannot send a domain more than its limit.
func TestUnlockMailsShareTheDomainLimit(t *testing.T) {
	f := newFixture(t, func(c *auth.Config) {
		c.Limits[auth.RuleResetDomain] = ratelimit.Limit{Count: 2, Window: time.Minute}
	})
	for _, email := range []string{"a@busy.example", "b@busy.example", "c@busy.example"} {
		f.addUser(t, email, "old password", false)
	}
	if err := f.svc.RequestReset(t.Context(), "a@busy.example", client("192.0.2.1")); err != nil {
		t.Fatal(err)
	}
	for _, email := range []string{"b@busy.example", "c@busy.example"} {
		if err := f.svc.RequestUnlock(t.Context(), email, client("192.0.2.1")); err != nil {
			t.Fatal(err)
		}
	}
	f.waitResets(t)
	if n := len(f.mail.Messages()); n != 2 {
		t.Fatalf("%d mails sent to busy.example, want its limit of 2", n)
	}
	if err := f.svc.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, f, `SELECT count(*) FROM security_events WHERE kind = 'reset_mail_dropped' AND detail->>'reason' = 'domain_limit'`); n != 1 {
		t.Fatalf("%d mails counted as dropped for the domain's limit, want 1", n)
	}
}

// TestLinkLivesFromItsMail: a reset mail that waited for a busy domain
// says its link works for the reset links' life, and it does, counted
// from when the mail is made: counted from the request, the wait would
// come off a life the mail still promises whole.
func TestLinkLivesFromItsMail(t *testing.T) {
	var slow *slowMailer
	f := newFixture(t, func(c *auth.Config) {
		c.Limits[auth.RuleResetIP] = ratelimit.Limit{Count: 100, Window: time.Minute}
	}, func(d *app.Deps) { slow = newSlowMailer(d.Mailer); slow.domain = "slow.example"; d.Mailer = slow })
	f.advance(0) // the service's clock, from now on moved only by the test
	for i := range 3 {
		email := fmt.Sprintf("user%d@slow.example", i)
		f.addUser(t, email, "old password", false)
		if err := f.svc.RequestReset(t.Context(), email, client("192.0.2.1")); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			slow.waitInFlight(t, 2) // the third waits for one of these
		}
	}
	wait := f.cfg.ResetTTL - time.Minute
	f.advance(wait)
	slow.let()
	body := f.mail.WaitFor(t, "user2@slow.example").Body
	if life := auth.LinkLife(f.cfg.ResetTTL); !strings.Contains(body, "within "+life) {
		t.Fatalf("the mail does not say its link works %s:\n%s", life, body)
	}
	m := resetLink.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no reset link in the mail:\n%s", body)
	}
	f.advance(f.cfg.ResetTTL - wait/2)
	if err := f.svc.CheckResetToken(t.Context(), m[1], client("198.51.100.21")); err != nil {
		t.Fatalf("the link, %s after its mail said it works %s: %v", f.cfg.ResetTTL-wait/2, auth.LinkLife(f.cfg.ResetTTL), err)
	}
	f.advance(wait)
	if err := f.svc.CheckResetToken(t.Context(), m[1], client("198.51.100.21")); !errors.Is(err, auth.ErrInvalidToken) {
		t.Fatalf("the link past its life: %v, want ErrInvalidToken", err)
	}
}

// TestHeldMailsOverTheirLimitDoNotWaitForASlowDomain: the mails of held
// sign-ins (each retry of a right password from a new browser is one) are
// decided by their account's limit before they take a place among the
// mails waiting for a busy domain: a flood of them for one account while
// its provider's mail server is slow does not drop the reset mail of
// another account there that asks after them.
func TestHeldMailsOverTheirLimitDoNotWaitForASlowDomain(t *testing.T) {
	var slow *slowMailer
	f := newFixture(t, func(c *auth.Config) {
		c.NewDeviceVerification = auth.VerifyAlways
		c.NotifyNewDevice = false
		for _, rule := range []string{auth.RuleLoginIP, auth.RuleLoginNetwork, auth.RuleLoginAccount} {
			c.Limits.SetCount(rule, 5000)
		}
	}, func(d *app.Deps) { slow = newSlowMailer(d.Mailer); slow.domain = "slow.example"; d.Mailer = slow })
	for i := range 3 {
		f.addUser(t, fmt.Sprintf("user%d@slow.example", i), "old password", false)
	}
	f.addUser(t, "mallory@slow.example", "her leaked password", false)
	for i := range 2 {
		if err := f.svc.RequestReset(t.Context(), fmt.Sprintf("user%d@slow.example", i), client("192.0.2.1")); err != nil {
			t.Fatal(err)
		}
	}
	slow.waitInFlight(t, 2)
	for i := range 1024 + 8 {
		_, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "mallory@slow.example", Password: "her leaked password",
			Client: client(fmt.Sprintf("10.%d.%d.1", i/250, i%250))})
		if !errors.Is(err, auth.ErrVerificationRequired) {
			t.Fatalf("held sign-in %d: %v, want ErrVerificationRequired", i, err)
		}
	}
	if err := f.svc.RequestReset(t.Context(), "user2@slow.example", client("192.0.2.1")); err != nil {
		t.Fatal(err)
	}
	// Every job taken from the queue and given its place (or dropped)
	// before the mail server speeds up: the mails pending stop changing.
	for last, still := int64(-1), 0; still < 10; time.Sleep(30 * time.Millisecond) {
		if n := auth.ResetsPending(f.svc); n != last {
			last, still = n, 0
		} else {
			still++
		}
	}
	slow.let()
	if len(mailsTo(t, f, "user2@slow.example")) == 0 {
		t.Fatal("the reset mail of user2@slow.example, asked for after a flood of held sign-ins at its domain, was dropped")
	}
}
