package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xcloak/xcloak/internal/cli"
)

const httpDescription = `Attacks a running XCloak over HTTP like a botnet. The credential list is
--accounts accounts x --passwords passwords, walked password by password
(every account gets the first password, then the second, ...) and from the
start again when it runs out, as bots retry what was refused. Attempts come
from --sources loopback addresses (127.0.1.1, 127.0.1.2, ...), at --rate per
second or as fast as --workers allow, until --duration or --max-requests
ends the run. Meanwhile a legitimate user (--legit-email) signs in every
--legit-interval from its own address, with a cookie jar like a browser;
it signs in once before the attack starts, as a returning user whose browser
the server already knows, and that sign-in is not measured. --legit-users
runs several such browsers of the same account, each from its own address
(--legit-source, then the addresses below it) and with its own cookies,
their sign-ins spread evenly over the interval: more samples of the same
user's latency in the same time, each browser within the per-address and
per-device limits one browser would meet.

A 401 is an attempt that reached password checking; the report compares
each account's count with --account-limit. Exits with status 1 if an
account reached password checking more often than that.

By default the accounts do not exist. --found-password plants that password
as the last of the list, so a test that creates user0 with it sees it found.
`

// loginPath is where the JSON sign-in API lives.
const loginPath = "/api/v1/login"

// attackConfig is one http run, as the flags gave it.
type attackConfig struct {
	target           *url.URL
	accounts         int
	passwords        int
	emailPattern     string
	foundPassword    string
	sources          int
	workers          int
	rate             float64
	duration         time.Duration
	maxRequests      int
	accountLimit     int
	lockoutThreshold int
	legitEmail       string
	legitPassword    string
	legitSource      netip.Addr
	legitUsers       int
	legitInterval    time.Duration
	requestTimeout   time.Duration
	allow            bool
}

func httpCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("stuffing", "http", "--target URL [flags]", httpDescription)
	var c attackConfig
	target, legitSource, jsonOut := addAttackFlags(fs, &c)
	if err := cli.Parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	if err := c.prepare(ctx, stderr, *target, *legitSource); err != nil {
		return err
	}

	progressOut := stdout
	if *jsonOut {
		progressOut = stderr
	}
	rep, err := attack(ctx, c, newProgress(progressOut, c))
	if err != nil {
		return err
	}
	if *jsonOut {
		if err := writeJSON(stdout, rep); err != nil {
			return err
		}
	} else {
		rep.print(stdout, c)
	}
	if rep.AccountsOverLimit > 0 {
		return fmt.Errorf("%d accounts reached password checking more than %d times", rep.AccountsOverLimit, c.accountLimit)
	}
	return nil
}

// addAttackFlags defines an http run's flags on fs, into c, but for the
// three that prepare and the caller read: the target, the legitimate
// user's source and --json.
func addAttackFlags(fs *flag.FlagSet, c *attackConfig) (target, legitSource *string, jsonOut *bool) {
	target = fs.String("target", "", "base `URL` of the XCloak to attack, such as http://127.0.0.1:8080 (required)")
	fs.IntVar(&c.accounts, "accounts", 100, "accounts in the credential list (`n`)")
	fs.IntVar(&c.passwords, "passwords", 100, "passwords tried per account (`n`)")
	fs.StringVar(&c.emailPattern, "email-pattern", "user%d@example.com", "account addresses, `pattern` with one %d for the account number")
	fs.StringVar(&c.foundPassword, "found-password", "", "plant this `password` as the last one of the list")
	fs.IntVar(&c.sources, "sources", 200, "loopback source addresses the attempts come from (`n`); 0 lets the system pick")
	fs.IntVar(&c.workers, "workers", 64, "attempts in flight at once (`n`)")
	fs.Float64Var(&c.rate, "rate", 0, "attempts per second (`r`); 0 sends as fast as the workers can")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long the run lasts (at most 10m)")
	fs.IntVar(&c.maxRequests, "max-requests", 100_000, "most attempts the attack sends (`n`); 0 runs only the legitimate user")
	fs.IntVar(&c.accountLimit, "account-limit", 10, "sign-in attempts per account the server admits per window (`n`), to compare with")
	fs.IntVar(&c.lockoutThreshold, "lockout-threshold", 10, "failed sign-ins that lock an account on the server (`n`), to count lockouts")
	fs.StringVar(&c.legitEmail, "legit-email", "", "`email` of an existing account a legitimate user signs in to during the attack")
	fs.StringVar(&c.legitPassword, "legit-password", "", "`password` of that account")
	legitSource = fs.String("legit-source", "127.0.0.250", "loopback `address` the legitimate user comes from")
	fs.DurationVar(&c.legitInterval, "legit-interval", time.Second, "time between the legitimate user's sign-ins (at least 100ms)")
	fs.IntVar(&c.legitUsers, "legit-users", 1, "browsers of the legitimate user, each from its own address (`n`, 1 to 64)")
	fs.DurationVar(&c.requestTimeout, "request-timeout", 10*time.Second, "bound on each request")
	jsonOut = fs.Bool("json", false, "print the report as JSON; progress goes to stderr")
	fs.BoolVar(&c.allow, "allow-non-loopback", false, "allow a target that is not on this machine's loopback")
	return target, legitSource, jsonOut
}

// prepare checks the flags and the target, and sets c.target: nil once c
// can run. A flag out of its bounds is a usage error, written to stderr.
func (c *attackConfig) prepare(ctx context.Context, stderr io.Writer, target, legitSource string) error {
	if err := c.check(target, legitSource); err != nil {
		return badFlag(stderr, "%v", err)
	}
	u, err := checkTarget(ctx, target, c.allow)
	if err != nil {
		return err
	}
	c.target = u
	if c.sources > 0 || c.legitEmail != "" {
		// Bound sources are loopback addresses, which reach only this machine.
		if a, found, err := nonLoopback(ctx, u.Hostname()); err != nil {
			return err
		} else if found {
			return badFlag(stderr, "--sources and the legitimate user bind loopback addresses, which cannot reach %s; give --sources 0 and no --legit-email", a)
		}
	}
	return nil
}

// check validates the flags that need no network.
func (c *attackConfig) check(target, legitSource string) error {
	switch {
	case target == "":
		return errors.New("--target is required")
	case c.accounts < 1 || c.accounts > maxAccounts:
		return fmt.Errorf("--accounts %d out of range 1..%d", c.accounts, maxAccounts)
	case c.passwords < 1 || c.passwords > maxPasswords:
		return fmt.Errorf("--passwords %d out of range 1..%d", c.passwords, maxPasswords)
	case strings.Count(c.emailPattern, "%") != 1 || strings.Count(c.emailPattern, "%d") != 1 || !strings.Contains(c.emailPattern, "@"):
		return fmt.Errorf("--email-pattern %q: want an address with exactly one %%d", c.emailPattern)
	case c.sources < 0 || c.sources > maxSources:
		return fmt.Errorf("--sources %d out of range 0..%d", c.sources, maxSources)
	case c.workers < 1 || c.workers > maxWorkers:
		return fmt.Errorf("--workers %d out of range 1..%d", c.workers, maxWorkers)
	case c.rate < 0 || c.rate > 1e6:
		return fmt.Errorf("--rate %g out of range 0..1000000", c.rate)
	case c.maxRequests < 0 || c.maxRequests > maxRequests:
		return fmt.Errorf("--max-requests %d out of range 0..%d", c.maxRequests, maxRequests)
	case c.accountLimit < 1 || c.lockoutThreshold < 1:
		return errors.New("--account-limit and --lockout-threshold must be at least 1")
	case (c.legitEmail == "") != (c.legitPassword == ""):
		return errors.New("give --legit-email and --legit-password together")
	case c.legitUsers < 1 || c.legitUsers > maxLegitUsers:
		return fmt.Errorf("--legit-users %d out of range 1..%d", c.legitUsers, maxLegitUsers)
	}
	if err := inBounds("duration", c.duration, 100*time.Millisecond, maxDuration); err != nil {
		return err
	}
	if err := inBounds("legit-interval", c.legitInterval, 100*time.Millisecond, maxDuration); err != nil {
		return err
	}
	if err := inBounds("request-timeout", c.requestTimeout, 100*time.Millisecond, time.Minute); err != nil {
		return err
	}
	a, err := netip.ParseAddr(legitSource)
	if err != nil || !a.Is4() || !a.IsLoopback() {
		return fmt.Errorf("--legit-source %q: want an address in 127.0.0.0/8", legitSource)
	}
	c.legitSource = a
	lowest := c.legitAddr(c.legitUsers - 1)
	if !lowest.IsLoopback() || lowest.As4()[3] == 0 {
		return fmt.Errorf("--legit-users %d from --legit-source %s: the lowest address, %s, is not a host of 127.0.0.0/8", c.legitUsers, a, lowest)
	}
	if c.sources > 0 {
		first, last := sourceAddr(0), sourceAddr(c.sources-1)
		switch {
		case a.Compare(first) >= 0 && a.Compare(last) <= 0:
			return fmt.Errorf("--legit-source %s is one of the attack's sources %s-%s", a, first, last)
		case a.Compare(last) > 0 && lowest.Compare(last) <= 0:
			return fmt.Errorf("--legit-users %d from --legit-source %s reach the attack's sources %s-%s", c.legitUsers, a, first, last)
		}
	}
	return nil
}

// maxLegitUsers bounds --legit-users.
const maxLegitUsers = 64

// legitAddr is the address of the legitimate user's browser i:
// --legit-source, then the addresses below it.
func (c *attackConfig) legitAddr(i int) netip.Addr {
	a := c.legitSource
	for range i {
		a = a.Prev()
	}
	return a
}

// sourceAddr is the address of attack source i: 127.0.1.1 onwards, 254 per
// /24, so that none is a network or broadcast address.
func sourceAddr(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{127, 0, byte(1 + i/254), byte(1 + i%254)})
}

// credential returns attempt k's account number and password.
func (c *attackConfig) credential(k int) (account int, password string) {
	account, p := k%c.accounts, (k/c.accounts)%c.passwords
	if c.foundPassword != "" && p == c.passwords-1 {
		return account, c.foundPassword
	}
	return account, fmt.Sprintf("guess-%06d", p)
}

func (c *attackConfig) email(account int) string {
	return fmt.Sprintf(c.emailPattern, account)
}

// newClient returns an HTTP client whose connections come from source
// (when valid) and go only where the loopback check allows.
func (c *attackConfig) newClient(source netip.Addr, jar http.CookieJar, idle int) *http.Client {
	return sourceClient(source, jar, idle, c.allow, c.requestTimeout)
}

// sourceClient returns an HTTP client whose connections come from source
// (when valid) and go only where the loopback check allows, keeping up to
// idle connections open (0 closes each after its request).
func sourceClient(source netip.Addr, jar http.CookieJar, idle int, allow bool, timeout time.Duration) *http.Client {
	d := guardedDialer{allow: allow, timeout: timeout}
	if source.IsValid() {
		d.local = &net.TCPAddr{IP: source.AsSlice()}
	}
	return &http.Client{
		Jar: jar,
		Transport: &http.Transport{
			DialContext:         d.DialContext,
			MaxIdleConnsPerHost: idle,
			DisableKeepAlives:   idle == 0,
			IdleConnTimeout:     30 * time.Second,
		},
		// A bot and a browser both see the 303 of a form post; the API
		// answers without redirects, so none is followed.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// outcome is what one attempt got.
type outcome struct {
	status     int
	retryAfter bool
	// session: the answer set a session cookie, so the attempt signed in.
	session bool
	// verification: a 202 whose body says {"status":"verification_required"}.
	verification bool
	err          error
	took         time.Duration
}

// sessionCookie is the base name of XCloak's session cookie; it has the
// __Host- prefix when cookies are Secure.
const sessionCookie = "xcloak_session"

// setsSession reports whether resp sets a non-empty session cookie.
func setsSession(resp *http.Response) bool {
	for _, c := range resp.Cookies() {
		if (c.Name == sessionCookie || c.Name == "__Host-"+sessionCookie) && c.Value != "" && c.MaxAge >= 0 {
			return true
		}
	}
	return false
}

// verificationRequired reports whether body is the JSON answer of a
// sign-in held for new-device verification.
func verificationRequired(body io.Reader) bool {
	var v struct {
		Status string `json:"status"`
	}
	return json.NewDecoder(io.LimitReader(body, 4<<10)).Decode(&v) == nil && v.Status == "verification_required"
}

// signIn posts one sign-in.
func signIn(ctx context.Context, client *http.Client, endpoint, email, password string, timeout time.Duration) outcome {
	body, _ := json.Marshal(struct {
		Email    string `json:"email"`
		Password string `json:"password"`
	}{email, password})
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return outcome{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return outcome{err: err, took: time.Since(start)}
	}
	o := outcome{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After") != ""}
	if len(resp.Header.Values("Set-Cookie")) > 0 {
		o.session = setsSession(resp)
	}
	if resp.StatusCode == http.StatusAccepted {
		o.verification = verificationRequired(resp.Body)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	o.took = time.Since(start)
	return o
}

// tally counts the attack's outcomes as they arrive. It is safe for
// concurrent use.
type tally struct {
	sent, ok, unauthorized, limited, limitedNoRetry atomic.Int64
	badRequest, unavailable, serverError, other     atomic.Int64
	transport, cancelled                            atomic.Int64
	// reached and found are per account: attempts that reached password
	// checking (401 or 200), and the 200s among them.
	reached, found []atomic.Int32
	latency        histogram

	errMu    sync.Mutex
	firstErr error
}

func (t *tally) add(account int, o outcome, cancelled bool) {
	t.sent.Add(1)
	switch {
	case o.err != nil && cancelled:
		t.cancelled.Add(1)
		return
	case o.err != nil:
		t.transport.Add(1)
		t.errMu.Lock()
		if t.firstErr == nil {
			t.firstErr = o.err
		}
		t.errMu.Unlock()
		return
	}
	t.latency.add(o.took)
	switch s := o.status; {
	case s == http.StatusOK:
		t.ok.Add(1)
		t.reached[account].Add(1)
		t.found[account].Add(1)
	case s == http.StatusUnauthorized:
		t.unauthorized.Add(1)
		t.reached[account].Add(1)
	case s == http.StatusTooManyRequests:
		t.limited.Add(1)
		if !o.retryAfter {
			t.limitedNoRetry.Add(1)
		}
	case s == http.StatusBadRequest:
		t.badRequest.Add(1)
	case s == http.StatusServiceUnavailable:
		t.unavailable.Add(1)
	case s >= 500:
		t.serverError.Add(1)
	default:
		t.other.Add(1)
	}
}

// legit is the legitimate user's record. It is safe for concurrent use.
type legit struct {
	mu       sync.Mutex
	attempts int
	ok       int
	samples  []time.Duration // successful sign-ins' latency
	statuses map[string]int
}

func (l *legit) add(o outcome) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.attempts++
	key := fmt.Sprint(o.status)
	if o.err != nil {
		key = "error"
	}
	if l.statuses == nil {
		l.statuses = map[string]int{}
	}
	l.statuses[key]++
	if o.err == nil && o.status == http.StatusOK {
		l.ok++
		l.samples = append(l.samples, o.took)
	}
}

func (l *legit) snapshot() (ok, attempts int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ok, l.attempts
}

// attack runs one http run and returns its report.
func attack(ctx context.Context, c attackConfig, prog *progress) (*httpReport, error) {
	browsers, err := c.legitBrowsers(ctx)
	if err != nil {
		return nil, err
	}
	defer closeIdle(browsers)
	return attackWith(ctx, c, browsers, prog), nil
}

// legitBrowsers returns the legitimate user's browsers, none without
// --legit-email, each signed in once: a returning user, whose browser
// holds its device cookie when the attack starts.
func (c *attackConfig) legitBrowsers(ctx context.Context) ([]*http.Client, error) {
	if c.legitEmail == "" {
		return nil, nil
	}
	endpoint := c.target.JoinPath(loginPath).String()
	var browsers []*http.Client
	for i := range c.legitUsers {
		jar, _ := cookiejar.New(nil)
		client := c.newClient(c.legitAddr(i), jar, 2)
		o := signIn(ctx, client, endpoint, c.legitEmail, c.legitPassword, c.requestTimeout)
		if o.err == nil && o.status != http.StatusOK {
			o.err = fmt.Errorf("answered %d; check --legit-email and --legit-password", o.status)
		}
		if o.err != nil {
			closeIdle(append(browsers, client))
			return nil, fmt.Errorf("the legitimate user's first sign-in from %s, before the attack: %w", c.legitAddr(i), o.err)
		}
		browsers = append(browsers, client)
	}
	return browsers, nil
}

func closeIdle(clients []*http.Client) {
	for _, cl := range clients {
		cl.CloseIdleConnections()
	}
}

// attackWith runs one http run beside the legitimate user's browsers
// (legitBrowsers), and returns its report.
func attackWith(ctx context.Context, c attackConfig, legitClients []*http.Client, prog *progress) *httpReport {
	endpoint := c.target.JoinPath(loginPath).String()
	t := &tally{reached: make([]atomic.Int32, c.accounts), found: make([]atomic.Int32, c.accounts)}
	l := &legit{}

	clients := make([]*http.Client, max(c.sources, 1))
	for i := range clients {
		var src netip.Addr
		if c.sources > 0 {
			src = sourceAddr(i)
		}
		// Each source keeps a couple of connections, as a bot would.
		clients[i] = c.newClient(src, nil, max(2, c.workers/len(clients)+1))
	}
	defer closeIdle(clients)

	// The attack stops sending at the deadline; attempts in flight finish
	// under their own timeout, unless the caller's context ends.
	runCtx, stopRun := context.WithTimeout(ctx, c.duration)
	defer stopRun()
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	if c.maxRequests > 0 {
		for range c.workers {
			wg.Go(func() {
				for {
					k := int(next.Add(1) - 1)
					if k >= c.maxRequests || runCtx.Err() != nil {
						return
					}
					if c.rate > 0 {
						due := start.Add(time.Duration(float64(k) / c.rate * float64(time.Second)))
						if !sleepUntil(runCtx, due) {
							return
						}
					}
					account, password := c.credential(k)
					o := signIn(ctx, clients[k%len(clients)], endpoint, c.email(account), password, c.requestTimeout)
					t.add(account, o, ctx.Err() != nil)
				}
			})
		}
	}
	attackDone := make(chan struct{})
	go func() {
		wg.Wait()
		close(attackDone)
	}()

	// The run ends when the attack has sent everything, or at the
	// deadline when there is no attack to wait for.
	var runDone <-chan struct{} = attackDone
	if c.maxRequests == 0 {
		runDone = runCtx.Done()
	}
	var legitWG sync.WaitGroup
	for i, legitClient := range legitClients {
		legitWG.Go(func() {
			// The browsers take turns: browser i starts i/n of the
			// interval after the first.
			if i > 0 && !sleepUntil(runCtx, start.Add(c.legitInterval*time.Duration(i)/time.Duration(len(legitClients)))) {
				return
			}
			tick := time.NewTicker(c.legitInterval)
			defer tick.Stop()
			for {
				l.add(signIn(ctx, legitClient, endpoint, c.legitEmail, c.legitPassword, c.requestTimeout))
				select {
				case <-runDone:
					return
				case <-runCtx.Done():
					return
				case <-tick.C:
				}
				if runCtx.Err() != nil {
					return
				}
			}
		})
	}

	prog.run(runDone, start, t, l)
	legitWG.Wait()
	<-attackDone
	elapsed := time.Since(start)

	stoppedBy := "max-requests"
	switch {
	case ctx.Err() != nil:
		stoppedBy = "interrupt"
	case runCtx.Err() != nil:
		stoppedBy = "duration"
	}
	return newReport(c, t, l, elapsed, stoppedBy)
}

// sleepUntil waits for due; false if ctx ended first.
func sleepUntil(ctx context.Context, due time.Time) bool {
	d := time.Until(due)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// httpReport is the result of an http run; --json prints it as is.
type httpReport struct {
	Target          string  `json:"target"`
	Accounts        int     `json:"accounts"`
	Passwords       int     `json:"passwords"`
	Sources         int     `json:"sources"`
	Workers         int     `json:"workers"`
	Rate            float64 `json:"rate"`
	DurationSeconds float64 `json:"duration_seconds"`
	StoppedBy       string  `json:"stopped_by"`

	Sent           int64   `json:"attempts_sent"`
	SentPerSecond  float64 `json:"attempts_per_second"`
	Reached        int64   `json:"reached_password_checking"`
	Unauthorized   int64   `json:"status_401"`
	Limited        int64   `json:"status_429"`
	LimitedPerSec  float64 `json:"status_429_per_second"`
	LimitedNoRetry int64   `json:"status_429_without_retry_after"`
	Found          int64   `json:"status_200"`
	BadRequest     int64   `json:"status_400"`
	Unavailable    int64   `json:"status_503"`
	ServerErrors   int64   `json:"server_errors"`
	OtherStatus    int64   `json:"other_status"`
	TransportErrs  int64   `json:"transport_errors"`
	FirstError     string  `json:"first_transport_error,omitempty"`
	Cancelled      int64   `json:"cancelled"`
	AttackP50Ms    float64 `json:"attack_p50_ms"`
	AttackP99Ms    float64 `json:"attack_p99_ms"`

	AccountLimit      int     `json:"account_limit"`
	ReachedMax        int     `json:"reached_per_account_max"`
	ReachedMean       float64 `json:"reached_per_account_mean"`
	AccountsOverLimit int     `json:"accounts_over_limit"`
	LockoutThreshold  int     `json:"lockout_threshold"`
	Lockouts          int     `json:"lockouts"`
	PasswordsFound    int     `json:"passwords_found"`

	Legit *legitReport `json:"legit,omitempty"`
}

// legitReport is the legitimate user's part of the report.
type legitReport struct {
	Email  string `json:"email"`
	Source string `json:"source"`
	// Users is how many browsers of the user signed in, each from its own
	// address of Source.
	Users       int            `json:"users"`
	Attempts    int            `json:"attempts"`
	Succeeded   int            `json:"succeeded"`
	SuccessRate float64        `json:"success_rate"`
	P50Ms       float64        `json:"p50_ms"`
	P99Ms       float64        `json:"p99_ms"`
	MaxMs       float64        `json:"max_ms"`
	Statuses    map[string]int `json:"statuses"`
	// SamplesMs are the successful sign-ins' latencies in order, so that
	// several runs can be pooled.
	SamplesMs []float64 `json:"samples_ms"`
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func newReport(c attackConfig, t *tally, l *legit, elapsed time.Duration, stoppedBy string) *httpReport {
	r := &httpReport{
		Target: c.target.String(), Accounts: c.accounts, Passwords: c.passwords, Sources: c.sources,
		Workers: c.workers, Rate: c.rate, DurationSeconds: elapsed.Seconds(), StoppedBy: stoppedBy,
		Sent: t.sent.Load(), Unauthorized: t.unauthorized.Load(), Limited: t.limited.Load(),
		LimitedNoRetry: t.limitedNoRetry.Load(), Found: t.ok.Load(), BadRequest: t.badRequest.Load(),
		Unavailable: t.unavailable.Load(), OtherStatus: t.other.Load(), TransportErrs: t.transport.Load(),
		Cancelled: t.cancelled.Load(), AttackP50Ms: ms(t.latency.percentile(50)), AttackP99Ms: ms(t.latency.percentile(99)),
		AccountLimit: c.accountLimit, LockoutThreshold: c.lockoutThreshold,
	}
	r.ServerErrors = t.serverError.Load() + r.Unavailable
	r.SentPerSecond = float64(r.Sent) / elapsed.Seconds()
	r.LimitedPerSec = float64(r.Limited) / elapsed.Seconds()
	if t.firstErr != nil {
		r.FirstError = t.firstErr.Error()
	}
	var total int64
	for i := range t.reached {
		n := int(t.reached[i].Load())
		total += int64(n)
		r.ReachedMax = max(r.ReachedMax, n)
		if n > c.accountLimit {
			r.AccountsOverLimit++
		}
		// An account's 401s are its failures; the lockout counts failures.
		if n-int(t.found[i].Load()) >= c.lockoutThreshold {
			r.Lockouts++
		}
		if t.found[i].Load() > 0 {
			r.PasswordsFound++
		}
	}
	r.Reached = total
	r.ReachedMean = float64(total) / float64(c.accounts)
	if c.legitEmail != "" {
		l.mu.Lock()
		defer l.mu.Unlock()
		s := slices.Clone(l.samples)
		slices.Sort(s)
		source := c.legitSource.String()
		if c.legitUsers > 1 {
			source = c.legitAddr(c.legitUsers-1).String() + "-" + source
		}
		lr := &legitReport{Email: c.legitEmail, Source: source, Users: c.legitUsers, Attempts: l.attempts, Succeeded: l.ok, Statuses: l.statuses}
		for _, d := range l.samples {
			lr.SamplesMs = append(lr.SamplesMs, ms(d))
		}
		if l.attempts > 0 {
			lr.SuccessRate = float64(l.ok) / float64(l.attempts)
		}
		if len(s) > 0 {
			lr.P50Ms, lr.P99Ms, lr.MaxMs = ms(percentileOf(s, 50)), ms(percentileOf(s, 99)), ms(s[len(s)-1])
		}
		r.Legit = lr
	}
	return r
}

func (r *httpReport) print(w io.Writer, c attackConfig) {
	pace := "as fast as possible"
	if r.Rate > 0 {
		pace = fmt.Sprintf("at %g attempts/s", r.Rate)
	}
	sources := "the system's choice of address"
	if r.Sources > 0 {
		sources = fmt.Sprintf("%d addresses (%s-%s)", r.Sources, sourceAddr(0), sourceAddr(r.Sources-1))
	}
	fmt.Fprintf(w, "target              %s%s\n", r.Target, loginPath)
	fmt.Fprintf(w, "credential list     %d accounts x %d passwords, from %s, %s, %d workers\n", r.Accounts, r.Passwords, sources, pace, r.Workers)
	fmt.Fprintf(w, "ran                 %.1fs, stopped by %s\n", r.DurationSeconds, r.StoppedBy)
	fmt.Fprintf(w, "attempts sent       %d (%.0f/s), attacker latency p50 %.2fms p99 %.2fms\n", r.Sent, r.SentPerSecond, r.AttackP50Ms, r.AttackP99Ms)
	fmt.Fprintf(w, "  401 reached password checking  %d\n", r.Unauthorized)
	fmt.Fprintf(w, "  200 password found             %d\n", r.Found)
	fmt.Fprintf(w, "  429 rejected by limits         %d (%.0f/s)", r.Limited, r.LimitedPerSec)
	if r.LimitedNoRetry > 0 {
		fmt.Fprintf(w, ", %d without Retry-After", r.LimitedNoRetry)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  400 bad request                %d\n", r.BadRequest)
	fmt.Fprintf(w, "  5xx server errors              %d (503: %d)\n", r.ServerErrors, r.Unavailable)
	if r.OtherStatus > 0 {
		fmt.Fprintf(w, "  other statuses                 %d\n", r.OtherStatus)
	}
	fmt.Fprintf(w, "  transport errors               %d", r.TransportErrs)
	if r.FirstError != "" {
		fmt.Fprintf(w, " (first: %s)", r.FirstError)
	}
	fmt.Fprintln(w)
	if r.Cancelled > 0 {
		fmt.Fprintf(w, "  cancelled by interrupt         %d\n", r.Cancelled)
	}
	fmt.Fprintf(w, "per account         reached password checking max %d, mean %.2f; limit %d; %d accounts over the limit\n",
		r.ReachedMax, r.ReachedMean, r.AccountLimit, r.AccountsOverLimit)
	fmt.Fprintf(w, "lockouts            %d accounts reached %d failures\n", r.Lockouts, r.LockoutThreshold)
	fmt.Fprintf(w, "passwords found     %d\n", r.PasswordsFound)
	if lr := r.Legit; lr != nil {
		fmt.Fprintf(w, "legitimate user     %s from %s: %d of %d signed in (%.1f%%), p50 %.2fms p99 %.2fms max %.2fms, statuses %v\n",
			lr.Email, lr.Source, lr.Succeeded, lr.Attempts, 100*lr.SuccessRate, lr.P50Ms, lr.P99Ms, lr.MaxMs, lr.Statuses)
		if lr.Statuses["429"] > 0 {
			fmt.Fprintf(w, "                    the user was rate limited: %d sign-ins every %s exceed the server's per-device or per-address\n"+
				"                    limit (defaults 10/10m and 50/10m); raise XCLOAK_LIMIT_LOGIN_DEVICE, or run shorter\n",
				lr.Attempts, c.legitInterval)
		}
	}
}
