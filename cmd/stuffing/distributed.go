package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"net/http/cookiejar"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xcloak/xcloak/internal/cli"
)

const distributedDescription = `Reproduces a distributed credential-stuffing run against a running XCloak:
--accounts accounts exist (created here, straight in its database, and
deleted afterwards); --leaked of them have their real password in the
attacker's list; the list also holds --unknown addresses with no account;
every other entry's password is wrong (each entry its own, as a list leaked
from another site). The list is sent once, shuffled, each source address
sending at most --per-address attempts, --per-network addresses per /24
(127.10.0.0 onwards, so the run spans many /24s), at --rate per second.

Around the attack: --returning users sign in once before it, each from its
own address with a cookie jar, and again during it with their device cookie;
--new-device users sign in once during it from a browser the server has never
seen; an admin, signed in before the attack, reads GET /api/v1/admin/stats
every --poll to see when attack mode comes on (a server without an "attack"
field there reports nothing).

The report gives the answers by status, the leaked passwords that signed in
(answered 200 with a session cookie), leaked passwords held for verification
(202), when attack mode started after the attack's first request, and what
the returning and new-device users got, with latency. After the admin's last
read, each leaked password that signed in reads GET /account once more, from
its own address and cookie jar, without following redirects: a 200 is a
takeover (the session still works), a redirect to /login a session that the
server ended meanwhile (as when attack mode signs out the browsers new to an
account that signed in just before it), anything else a failed check.
`

// distConfig is one distributed run, as the flags gave it.
type distConfig struct {
	target         *url.URL
	databaseURL    string
	accounts       int
	leaked         int
	unknown        int
	perAddress     int
	perNetwork     int
	returning      int
	newDevice      int
	rate           float64
	workers        int
	duration       time.Duration
	requestTimeout time.Duration
	poll           time.Duration
	tail           time.Duration
	tag            string
	seed           uint64
	keepAccounts   bool
	allow          bool
}

// Bounds of a distributed run beyond the common ones.
const (
	maxDistAccounts = 100_000
	maxDistUnknown  = 100_000
	maxDistUsers    = 1000
	// distFirstOctet is the second octet of the first attack network:
	// 127.10.0.0/24 onwards, clear of the http command's 127.0.x.x and of
	// the users' own ranges (distUserOctet onwards).
	distFirstOctet = 10
	distUserOctet  = 200
	// maxDistNetworks is how many /24s lie between the two.
	maxDistNetworks = (distUserOctet - distFirstOctet) * 256
)

// tagPattern is what --tag accepts: it becomes part of every email.
var tagPattern = regexp.MustCompile(`^[a-z0-9]{1,16}$`)

func distributedCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("stuffing", "distributed", "--target URL [flags]", distributedDescription)
	var c distConfig
	target := fs.String("target", "", "base `URL` of the XCloak to attack, such as http://127.0.0.1:8080 (required)")
	fs.StringVar(&c.databaseURL, "database-url", "postgres://postgres@127.0.0.1:5432/xcloak?sslmode=disable", "`URL` of the target's Postgres, where the accounts are created")
	fs.IntVar(&c.accounts, "accounts", 1000, "accounts that exist (`n`)")
	fs.IntVar(&c.leaked, "leaked", 20, "accounts whose real password is in the attacker's list (`n`)")
	fs.IntVar(&c.unknown, "unknown", 500, "addresses in the list with no account (`n`)")
	fs.IntVar(&c.perAddress, "per-address", 2, "attempts each source address sends at most (`n`)")
	fs.IntVar(&c.perNetwork, "per-network", 2, "source addresses per /24 (`n`, at most 254)")
	fs.IntVar(&c.returning, "returning", 50, "returning users (`n`): signed in before the attack, again during it with their device cookie")
	fs.IntVar(&c.newDevice, "new-device", 20, "users (`n`) who sign in during the attack from a browser the server has not seen")
	fs.Float64Var(&c.rate, "rate", 70, "attempts per second (`r`); 0 sends as fast as the workers can")
	fs.IntVar(&c.workers, "workers", 32, "attempts in flight at once (`n`)")
	fs.DurationVar(&c.duration, "duration", maxDuration, "bound on the attack (at most 10m); the list is sent whole unless this ends it")
	fs.DurationVar(&c.requestTimeout, "request-timeout", 10*time.Second, "bound on each request")
	fs.DurationVar(&c.poll, "poll", 250*time.Millisecond, "time between the admin's reads of the stats")
	fs.DurationVar(&c.tail, "tail", 3*time.Second, "how long the admin keeps reading the stats after the attack")
	fs.StringVar(&c.tag, "tag", "", "`tag` in every email of the run (lower-case letters and digits); random by default")
	fs.Uint64Var(&c.seed, "seed", 1, "`seed` of the roles' choice and of the list's order")
	fs.BoolVar(&c.keepAccounts, "keep-accounts", false, "leave the run's accounts in the database")
	jsonOut := fs.Bool("json", false, "print the report as JSON; progress goes to stderr")
	fs.BoolVar(&c.allow, "allow-non-loopback", false, "allow a target or database that is not on this machine's loopback")
	if err := cli.Parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	if err := c.check(*target); err != nil {
		return badFlag(stderr, "%v", err)
	}
	u, err := checkTarget(ctx, *target, c.allow)
	if err != nil {
		return err
	}
	// Every request comes from a bound loopback address.
	if a, found, err := nonLoopback(ctx, u.Hostname()); err != nil {
		return err
	} else if found {
		return badFlag(stderr, "the run binds loopback source addresses, which cannot reach %s", a)
	}
	c.target = u
	if c.tag == "" {
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		c.tag = hex.EncodeToString(b)
	}

	progressOut := stdout
	if *jsonOut {
		progressOut = stderr
	}
	rep, err := distributed(ctx, c, progressOut)
	if err != nil {
		return err
	}
	if *jsonOut {
		return writeJSON(stdout, rep)
	}
	rep.print(stdout)
	return nil
}

// check validates the flags that need no network.
func (c *distConfig) check(target string) error {
	switch {
	case target == "":
		return errors.New("--target is required")
	case c.accounts < 1 || c.accounts > maxDistAccounts:
		return fmt.Errorf("--accounts %d out of range 1..%d", c.accounts, maxDistAccounts)
	case c.unknown < 0 || c.unknown > maxDistUnknown:
		return fmt.Errorf("--unknown %d out of range 0..%d", c.unknown, maxDistUnknown)
	case c.leaked < 0 || c.returning < 0 || c.newDevice < 0 || c.returning > maxDistUsers || c.newDevice > maxDistUsers:
		return fmt.Errorf("--leaked must be at least 0, --returning and --new-device in 0..%d", maxDistUsers)
	case c.leaked+c.returning+c.newDevice > c.accounts:
		return fmt.Errorf("--leaked %d + --returning %d + --new-device %d are more than --accounts %d: each is a different account",
			c.leaked, c.returning, c.newDevice, c.accounts)
	case c.perAddress < 1 || c.perAddress > 1000:
		return fmt.Errorf("--per-address %d out of range 1..1000", c.perAddress)
	case c.perNetwork < 1 || c.perNetwork > 254:
		return fmt.Errorf("--per-network %d out of range 1..254", c.perNetwork)
	case c.networks() > maxDistNetworks:
		return fmt.Errorf("the list needs %d /24s at --per-address %d and --per-network %d, more than the %d the run has; raise either",
			c.networks(), c.perAddress, c.perNetwork, maxDistNetworks)
	case c.workers < 1 || c.workers > maxWorkers:
		return fmt.Errorf("--workers %d out of range 1..%d", c.workers, maxWorkers)
	case c.rate < 0 || c.rate > 1e6:
		return fmt.Errorf("--rate %g out of range 0..1000000", c.rate)
	case c.tag != "" && !tagPattern.MatchString(c.tag):
		return fmt.Errorf("--tag %q: want 1 to 16 lower-case letters and digits", c.tag)
	}
	for _, b := range []struct {
		name   string
		d      time.Duration
		lo, hi time.Duration
	}{
		{"duration", c.duration, 100 * time.Millisecond, maxDuration},
		{"request-timeout", c.requestTimeout, 100 * time.Millisecond, time.Minute},
		{"poll", c.poll, 50 * time.Millisecond, time.Minute},
		{"tail", c.tail, 0, time.Minute},
	} {
		if err := inBounds(b.name, b.d, b.lo, b.hi); err != nil {
			return err
		}
	}
	return nil
}

// attempts is the length of the attacker's list.
func (c *distConfig) attempts() int { return c.accounts + c.unknown }

// addresses is how many source addresses send the list.
func (c *distConfig) addresses() int { return ceilDiv(c.attempts(), c.perAddress) }

// networks is how many /24s the source addresses span.
func (c *distConfig) networks() int { return ceilDiv(c.addresses(), c.perNetwork) }

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// attemptSource is the address attempt k of the list comes from: source
// k/perAddress, perNetwork sources to a /24, /24s from 127.10.0.0 on.
func (c *distConfig) attemptSource(k int) netip.Addr {
	s := k / c.perAddress
	n := distFirstOctet*256 + s/c.perNetwork
	return netip.AddrFrom4([4]byte{127, byte(n / 256), byte(n % 256), byte(1 + s%c.perNetwork)})
}

// userSource is the address of user i of a group: returning users come from
// 127.200.x.x, new-device users from 127.201.x.x, the admin from 127.202.0.1.
func userSource(group, i int) netip.Addr {
	return netip.AddrFrom4([4]byte{127, byte(distUserOctet + group), byte(i / 254), byte(1 + i%254)})
}

const (
	groupReturning = iota
	groupNewDevice
	groupAdmin
)

// email is the address of list entry i: entries below --accounts have an
// account, the others do not.
func (c *distConfig) email(i int) string { return fmt.Sprintf("%s-%d@example.com", c.tag, i) }

func (c *distConfig) adminEmail() string { return c.tag + "-admin@example.com" }

// role is what a list entry is.
type role uint8

const (
	roleWrong   role = iota // an account; the list's password is not its own
	roleLeaked              // an account whose real password is in the list
	roleUnknown             // no account has the address
)

// entry is one credential of the attacker's list.
type entry struct {
	email, password string
	role            role
}

// plan is the run's accounts and list, decided before anything is sent.
type plan struct {
	// list is the attacker's list in the order it is sent.
	list []entry
	// passwords are the accounts' real passwords, by account number.
	passwords []string
	// returning and newDevice are account numbers.
	returning, newDevice []int
	adminPassword        string
}

// newPlan picks the roles and the list's order from the seed. Leaked
// accounts, returning users and new-device users have a password each, as
// real users do; every other account shares one, so that creating them
// costs one hash (nobody signs in to them with it). Had the users shared
// one, their own held sign-ins during attack mode would count towards
// that password's spraying lock, one per account, which a password of
// one's own never meets. Every wrong password of the list is distinct, as
// in a list leaked from another site, so no password is sprayed.
func newPlan(c distConfig) plan {
	rng := mrand.New(mrand.NewPCG(c.seed, 0x5eed))
	secret := make([]byte, 8)
	_, _ = rand.Read(secret)
	common := "own-" + c.tag + "-" + hex.EncodeToString(secret)
	p := plan{passwords: make([]string, c.accounts), adminPassword: "admin-" + c.tag + "-" + hex.EncodeToString(secret)}
	order := rng.Perm(c.accounts)
	leaked := make([]bool, c.accounts)
	for i, a := range order {
		switch {
		case i < c.leaked:
			leaked[a] = true
			p.passwords[a] = fmt.Sprintf("leaked-%s-%d", c.tag, a)
			continue
		case i < c.leaked+c.returning:
			p.returning = append(p.returning, a)
			p.passwords[a] = fmt.Sprintf("returning-%s-%d-%s", c.tag, a, hex.EncodeToString(secret))
			continue
		case i < c.leaked+c.returning+c.newDevice:
			p.newDevice = append(p.newDevice, a)
			p.passwords[a] = fmt.Sprintf("new-device-%s-%d-%s", c.tag, a, hex.EncodeToString(secret))
			continue
		}
		p.passwords[a] = common
	}
	p.list = make([]entry, c.attempts())
	for i := range p.list {
		e := entry{email: c.email(i), password: fmt.Sprintf("elsewhere-%s-%d", c.tag, i), role: roleWrong}
		switch {
		case i >= c.accounts:
			e.role = roleUnknown
		case leaked[i]:
			e.role, e.password = roleLeaked, p.passwords[i]
		}
		p.list[i] = e
	}
	rng.Shuffle(len(p.list), func(i, j int) { p.list[i], p.list[j] = p.list[j], p.list[i] })
	return p
}

// statusCounts counts answers by status.
type statusCounts struct {
	OK           int64 `json:"200"`
	Held         int64 `json:"202"`
	Unauthorized int64 `json:"401"`
	Limited      int64 `json:"429"`
	// Unavailable are 503s: every hashing slot stayed busy, or a store
	// was down.
	Unavailable int64 `json:"503"`
	Other       int64 `json:"other"`
	Errors      int64 `json:"transport_errors"`
}

func (s *statusCounts) add(o outcome) {
	switch {
	case o.err != nil:
		s.Errors++
	case o.status == http.StatusOK:
		s.OK++
	case o.status == http.StatusAccepted:
		s.Held++
	case o.status == http.StatusUnauthorized:
		s.Unauthorized++
	case o.status == http.StatusTooManyRequests:
		s.Limited++
	case o.status == http.StatusServiceUnavailable:
		s.Unavailable++
	default:
		s.Other++
	}
}

func (s statusCounts) total() int64 {
	return s.OK + s.Held + s.Unauthorized + s.Limited + s.Unavailable + s.Other + s.Errors
}

func (s statusCounts) String() string {
	return fmt.Sprintf("200 %d, 202 %d, 401 %d, 429 %d, 503 %d, other %d, errors %d",
		s.OK, s.Held, s.Unauthorized, s.Limited, s.Unavailable, s.Other, s.Errors)
}

// distTally counts the attack's answers as they arrive. It is safe for
// concurrent use.
type distTally struct {
	sent    atomic.Int64
	latency histogram

	mu                 sync.Mutex
	all, leaked, unkn  statusCounts
	held               int64
	okWithoutSession   int64
	heldWithoutMessage int64
	firstErr           error
	// signedIn are the browsers of the leaked passwords that signed in,
	// kept so that their sessions can be checked after the attack.
	signedIn []*http.Client
}

// add counts attempt e's outcome o; client is the browser that sent it.
func (t *distTally) add(e entry, o outcome, client *http.Client) {
	t.sent.Add(1)
	if o.err == nil {
		t.latency.add(o.took)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.all.add(o)
	if o.err != nil && t.firstErr == nil {
		t.firstErr = o.err
	}
	if o.err == nil && o.status == http.StatusOK && !o.session {
		t.okWithoutSession++
	}
	if o.err == nil && o.status == http.StatusAccepted && !o.verification {
		t.heldWithoutMessage++
	}
	switch e.role {
	case roleLeaked:
		t.leaked.add(o)
		if o.err == nil && o.status == http.StatusOK && o.session {
			t.signedIn = append(t.signedIn, client)
		}
		if o.err == nil && o.status == http.StatusAccepted {
			t.held++
		}
	case roleUnknown:
		t.unkn.add(o)
	}
}

// userGroup records one group of real users' sign-ins during the attack.
// It is safe for concurrent use.
type userGroup struct {
	mu       sync.Mutex
	statuses statusCounts
	signedIn int
	samples  []time.Duration
}

func (g *userGroup) add(o outcome) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.statuses.add(o)
	if o.err == nil {
		g.samples = append(g.samples, o.took)
		if o.status == http.StatusOK && o.session {
			g.signedIn++
		}
	}
}

// userGroupReport is a group of users' part of the report.
type userGroupReport struct {
	Users    int          `json:"users"`
	Attempts int64        `json:"attempts"`
	Statuses statusCounts `json:"statuses"`
	// SignedIn counts 200s with a session cookie.
	SignedIn int     `json:"signed_in"`
	P50Ms    float64 `json:"p50_ms"`
	P99Ms    float64 `json:"p99_ms"`
	MaxMs    float64 `json:"max_ms"`
}

func (g *userGroup) report(users int) userGroupReport {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := slices.Clone(g.samples)
	slices.Sort(s)
	r := userGroupReport{Users: users, Attempts: g.statuses.total(), Statuses: g.statuses, SignedIn: g.signedIn}
	if len(s) > 0 {
		r.P50Ms, r.P99Ms, r.MaxMs = ms(percentileOf(s, 50)), ms(percentileOf(s, 99)), ms(s[len(s)-1])
	}
	return r
}

// attackState is the "attack" object of GET /api/v1/admin/stats.
type attackState struct {
	Active  bool    `json:"active"`
	Since   *string `json:"since"`
	Trigger *string `json:"trigger"`
}

// readStats reads the stats once; present is false when the answer has no
// "attack" field (a server from before attack detection).
func readStats(ctx context.Context, client *http.Client, endpoint string, timeout time.Duration) (st attackState, present bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	if err != nil {
		return st, false, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return st, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return st, false, fmt.Errorf("GET %s answered %d", statsPath, resp.StatusCode)
	}
	var body map[string]json.RawMessage
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&body); err != nil {
		return st, false, fmt.Errorf("reading the stats: %w", err)
	}
	raw, ok := body["attack"]
	if !ok {
		return st, false, nil
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return st, true, fmt.Errorf("the stats' attack field %s: %w", raw, err)
	}
	return st, true, nil
}

// statsPath is the admin's stats API.
const statsPath = "/api/v1/admin/stats"

// modeWatch is what the admin's reads of the stats saw. It is safe for
// concurrent use.
type modeWatch struct {
	mu         sync.Mutex
	reported   bool
	before     attackState // the read just before the attack
	polls      int
	errors     int
	firstErr   error
	firstOn    time.Time // first read that saw attack mode on, after the attack started
	onState    attackState
	last       attackState
	lastActive bool
}

func (m *modeWatch) add(st attackState, present bool, err error, at time.Time, attackStarted bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.polls++
	if err != nil {
		m.errors++
		if m.firstErr == nil {
			m.firstErr = err
		}
		return
	}
	m.reported = m.reported || present
	if !attackStarted {
		m.before = st
	}
	m.last, m.lastActive = st, st.Active
	if attackStarted && st.Active && m.firstOn.IsZero() {
		m.firstOn, m.onState = at, st
	}
}

// poll reads the stats every c.poll until stop is closed or ctx ends.
func (m *modeWatch) poll(ctx context.Context, client *http.Client, endpoint string, c distConfig, stop <-chan struct{}) {
	tick := time.NewTicker(c.poll)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		st, present, err := readStats(ctx, client, endpoint, c.requestTimeout)
		m.add(st, present, err, time.Now(), true)
	}
}

// attackModeReport is what the report says of attack mode.
type attackModeReport struct {
	// Reported: the stats had an "attack" field at least once.
	Reported bool `json:"reported"`
	// ActiveBefore: attack mode was on before the attack started.
	ActiveBefore bool `json:"active_before_attack"`
	// SeenAfterSeconds is when the admin first saw attack mode on, after
	// the attack's first request; null if never.
	SeenAfterSeconds *float64 `json:"seen_after_seconds"`
	// Since is the server's own "since" at that read, and SinceAfterSeconds
	// the same time after the attack's first request (the server and the
	// simulator share this machine's clock).
	Since             *string  `json:"since"`
	SinceAfterSeconds *float64 `json:"since_after_seconds"`
	Trigger           *string  `json:"trigger"`
	ActiveAtEnd       bool     `json:"active_at_end"`
	Polls             int      `json:"polls"`
	PollErrors        int      `json:"poll_errors"`
	FirstPollError    string   `json:"first_poll_error,omitempty"`
}

func (m *modeWatch) report(start time.Time) attackModeReport {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := attackModeReport{Reported: m.reported, ActiveBefore: m.before.Active, ActiveAtEnd: m.lastActive, Polls: m.polls, PollErrors: m.errors}
	if m.firstErr != nil {
		r.FirstPollError = m.firstErr.Error()
	}
	if !m.firstOn.IsZero() {
		seen := m.firstOn.Sub(start).Seconds()
		r.SeenAfterSeconds, r.Since, r.Trigger = &seen, m.onState.Since, m.onState.Trigger
		if m.onState.Since != nil {
			if t, err := time.Parse(time.RFC3339Nano, *m.onState.Since); err == nil {
				since := t.Sub(start).Seconds()
				r.SinceAfterSeconds = &since
			}
		}
	}
	return r
}

// distReport is the result of a distributed run; --json prints it as is.
type distReport struct {
	Target          string  `json:"target"`
	Tag             string  `json:"tag"`
	Accounts        int     `json:"accounts"`
	Leaked          int     `json:"leaked"`
	Unknown         int     `json:"unknown"`
	PerAddress      int     `json:"per_address"`
	Addresses       int     `json:"addresses"`
	Networks        int     `json:"networks"`
	Rate            float64 `json:"rate"`
	Workers         int     `json:"workers"`
	DurationSeconds float64 `json:"duration_seconds"`
	StoppedBy       string  `json:"stopped_by"`

	Sent          int64        `json:"attempts_sent"`
	SentPerSecond float64      `json:"attempts_per_second"`
	Statuses      statusCounts `json:"statuses"`
	FirstError    string       `json:"first_transport_error,omitempty"`
	AttackP50Ms   float64      `json:"attack_p50_ms"`
	AttackP99Ms   float64      `json:"attack_p99_ms"`
	// Leaked and unknown entries' answers, out of Statuses.
	LeakedStatuses  statusCounts `json:"leaked_statuses"`
	UnknownStatuses statusCounts `json:"unknown_statuses"`
	// SignedInLeaked are leaked passwords that got 200 and a session
	// cookie. Takeovers are those whose session still worked after the
	// attack (GET /account answered 200), SessionsEnded those whose
	// session no longer did (a redirect to /login), and
	// SessionChecksFailed those whose check got neither answer.
	SignedInLeaked      int64  `json:"signed_in_leaked"`
	Takeovers           int64  `json:"takeovers"`
	SessionsEnded       int64  `json:"sessions_ended"`
	SessionChecksFailed int64  `json:"session_checks_failed"`
	FirstCheckError     string `json:"first_session_check_error,omitempty"`
	// LeakedHeld are leaked passwords answered 202: held for
	// verification, not taken over.
	LeakedHeld int64 `json:"leaked_held"`
	// OKWithoutSession and HeldWithoutMessage are answers that break
	// XCloak's contract: a 200 with no session, a 202 whose body is not
	// {"status":"verification_required"}.
	OKWithoutSession   int64 `json:"ok_without_session"`
	HeldWithoutMessage int64 `json:"held_without_message"`

	AttackMode attackModeReport `json:"attack_mode"`
	Returning  userGroupReport  `json:"returning_users"`
	NewDevice  userGroupReport  `json:"new_device_users"`
}

// distributed runs one distributed run and returns its report.
func distributed(ctx context.Context, c distConfig, progressOut io.Writer) (*distReport, error) {
	p := newPlan(c)
	accounts, err := openAccounts(ctx, c)
	if err != nil {
		return nil, err
	}
	defer accounts.close()
	created := time.Now()
	if err := accounts.create(ctx, c, p); err != nil {
		return nil, err
	}
	if !c.keepAccounts {
		defer func() {
			// An interrupted run still removes its accounts.
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			if err := accounts.remove(ctx, c); err != nil {
				fmt.Fprintf(progressOut, "removing the run's accounts: %v\n", err)
			}
		}()
	}
	fmt.Fprintf(progressOut, "created %d accounts and an admin (tag %s) in %.1fs\n", c.accounts, c.tag, time.Since(created).Seconds())

	loginURL := c.target.JoinPath(loginPath).String()
	statsURL := c.target.JoinPath(statsPath).String()
	browser := func(src netip.Addr) *http.Client {
		jar, _ := cookiejar.New(nil)
		return sourceClient(src, jar, 2, c.allow, c.requestTimeout)
	}

	// Before the attack: the admin and the returning users sign in, so
	// their browsers hold device cookies.
	admin := browser(userSource(groupAdmin, 0))
	defer admin.CloseIdleConnections()
	returning := make([]*http.Client, len(p.returning))
	for i := range returning {
		returning[i] = browser(userSource(groupReturning, i))
		defer returning[i].CloseIdleConnections()
	}
	if err := signInBefore(ctx, c, p, loginURL, admin, returning); err != nil {
		return nil, err
	}
	if err := accounts.backdate(ctx, c); err != nil {
		return nil, err
	}

	watch := &modeWatch{}
	st, present, err := readStats(ctx, admin, statsURL, c.requestTimeout)
	if err != nil {
		return nil, fmt.Errorf("the admin's first read of the stats: %w", err)
	}
	watch.add(st, present, nil, time.Now(), false)

	// During the attack each user signs in once, spread over the list:
	// user i of a group of n when the attack reaches entry (2i+1)N/2n.
	n := len(p.list)
	type signInAt struct {
		client      *http.Client
		email, pw   string
		group       *userGroup
		closeClient bool
	}
	due := make(map[int][]signInAt)
	retGroup, newGroup := &userGroup{}, &userGroup{}
	for i, a := range p.returning {
		k := (2*i + 1) * n / (2 * len(p.returning))
		due[k] = append(due[k], signInAt{returning[i], c.email(a), p.passwords[a], retGroup, false})
	}
	for i, a := range p.newDevice {
		k := (2*i + 1) * n / (2 * len(p.newDevice))
		due[k] = append(due[k], signInAt{browser(userSource(groupNewDevice, i)), c.email(a), p.passwords[a], newGroup, true})
	}

	runCtx, stopRun := context.WithTimeout(ctx, c.duration)
	defer stopRun()
	t := &distTally{}
	var users sync.WaitGroup
	var next atomic.Int64
	var workers sync.WaitGroup
	start := time.Now()

	pollDone := make(chan struct{})
	stopPoll := make(chan struct{})
	go func() {
		defer close(pollDone)
		watch.poll(ctx, admin, statsURL, c, stopPoll)
	}()

	for range c.workers {
		workers.Go(func() {
			for {
				k := int(next.Add(1) - 1)
				if k >= n || runCtx.Err() != nil {
					return
				}
				if c.rate > 0 && !sleepUntil(runCtx, start.Add(time.Duration(float64(k)/c.rate*float64(time.Second)))) {
					return
				}
				for _, u := range due[k] {
					users.Go(func() {
						if u.closeClient {
							defer u.client.CloseIdleConnections()
						}
						u.group.add(signIn(ctx, u.client, loginURL, u.email, u.pw, c.requestTimeout))
					})
				}
				e := p.list[k]
				// A jar of its own, empty at the sign-in, keeps a session
				// for the check after the attack.
				jar, _ := cookiejar.New(nil)
				cl := sourceClient(c.attemptSource(k), jar, 0, c.allow, c.requestTimeout)
				t.add(e, signIn(ctx, cl, loginURL, e.email, e.password, c.requestTimeout), cl)
			}
		})
	}
	attackDone := make(chan struct{})
	go func() {
		workers.Wait()
		users.Wait()
		close(attackDone)
	}()
	distProgress(progressOut, attackDone, start, t, watch)
	elapsed := time.Since(start)

	// The admin keeps watching a little: detection may lag the attack.
	if c.tail > 0 && ctx.Err() == nil {
		sleepUntil(ctx, time.Now().Add(c.tail))
	}
	close(stopPoll)
	<-pollDone

	// Then each leaked password that signed in looks at its session once
	// more: the server may have ended it since.
	t.mu.Lock()
	signedIn := slices.Clone(t.signedIn)
	t.mu.Unlock()
	checks := checkSessions(ctx, c, c.target.JoinPath(accountPath).String(), signedIn)

	stoppedBy := "end of list"
	switch {
	case ctx.Err() != nil:
		stoppedBy = "interrupt"
	case runCtx.Err() != nil && t.sent.Load() < int64(n):
		stoppedBy = "duration"
	}
	r := &distReport{
		Target: c.target.String(), Tag: c.tag, Accounts: c.accounts, Leaked: c.leaked, Unknown: c.unknown,
		PerAddress: c.perAddress, Addresses: c.addresses(), Networks: c.networks(), Rate: c.rate, Workers: c.workers,
		DurationSeconds: elapsed.Seconds(), StoppedBy: stoppedBy,
		Sent: t.sent.Load(), AttackP50Ms: ms(t.latency.percentile(50)), AttackP99Ms: ms(t.latency.percentile(99)),
		AttackMode: watch.report(start),
		Returning:  retGroup.report(len(p.returning)), NewDevice: newGroup.report(len(p.newDevice)),
	}
	r.SentPerSecond = float64(r.Sent) / elapsed.Seconds()
	t.mu.Lock()
	r.Statuses, r.LeakedStatuses, r.UnknownStatuses = t.all, t.leaked, t.unkn
	r.SignedInLeaked, r.LeakedHeld = int64(len(t.signedIn)), t.held
	r.OKWithoutSession, r.HeldWithoutMessage = t.okWithoutSession, t.heldWithoutMessage
	if t.firstErr != nil {
		r.FirstError = t.firstErr.Error()
	}
	t.mu.Unlock()
	r.Takeovers, r.SessionsEnded, r.SessionChecksFailed = checks.kept, checks.ended, checks.failed
	if checks.firstErr != nil {
		r.FirstCheckError = checks.firstErr.Error()
	}
	return r, nil
}

// accountPath is the signed-in account page; without a session it
// redirects to /login.
const accountPath = "/account"

// sessionChecks counts what checkSessions found.
type sessionChecks struct {
	kept, ended, failed int64
	firstErr            error
}

// checkSessions reads endpoint (the account page) once with each client,
// at most c.workers at a time, each from the address and with the cookie
// jar its sign-in used; the clients follow no redirects.
func checkSessions(ctx context.Context, c distConfig, endpoint string, clients []*http.Client) sessionChecks {
	var (
		mu  sync.Mutex
		r   sessionChecks
		wg  sync.WaitGroup
		sem = make(chan struct{}, c.workers)
	)
	for _, cl := range clients {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			kept, err := sessionWorks(ctx, cl, endpoint, c.requestTimeout)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				r.failed++
				if r.firstErr == nil {
					r.firstErr = err
				}
			case kept:
				r.kept++
			default:
				r.ended++
			}
		})
	}
	wg.Wait()
	return r
}

// sessionWorks reads the account page once: true on a 200, false on a
// redirect to /login (the session is gone), an error on anything else.
func sessionWorks(ctx context.Context, client *http.Client, endpoint string, timeout time.Duration) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	if err != nil {
		return false, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK:
		return true, nil
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		if loc, err := resp.Location(); err == nil && loc.Path == "/login" {
			return false, nil
		}
		return false, fmt.Errorf("GET %s answered %d to %q", accountPath, resp.StatusCode, resp.Header.Get("Location"))
	}
	return false, fmt.Errorf("GET %s answered %d", accountPath, resp.StatusCode)
}

// signInBefore signs the admin and the returning users in before the
// attack, four at a time, so that their browsers hold device cookies. It
// returns the first failure.
func signInBefore(ctx context.Context, c distConfig, p plan, endpoint string, admin *http.Client, returning []*http.Client) error {
	if err := warmUp(ctx, c, endpoint, admin, c.adminEmail(), p.adminPassword); err != nil {
		return fmt.Errorf("the admin's first sign-in: %w", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(returning))
	sem := make(chan struct{}, 4)
	for i, cl := range returning {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			a := p.returning[i]
			if err := warmUp(ctx, c, endpoint, cl, c.email(a), p.passwords[a]); err != nil {
				errs[i] = fmt.Errorf("returning user %d's first sign-in: %w", i, err)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// warmUp signs a browser in before the attack and wants a session.
func warmUp(ctx context.Context, c distConfig, endpoint string, client *http.Client, email, password string) error {
	o := signIn(ctx, client, endpoint, email, password, c.requestTimeout)
	switch {
	case o.err != nil:
		return o.err
	case o.status == http.StatusAccepted:
		return errors.New("answered 202: the server holds every new browser for verification " +
			"(XCLOAK_NEW_DEVICE_VERIFICATION=always, or attack mode still on from an earlier run); " +
			"run with XCLOAK_NEW_DEVICE_VERIFICATION=attack once attack mode is off")
	case o.status != http.StatusOK || !o.session:
		return fmt.Errorf("answered %d (session cookie: %t); is --database-url the target's database?", o.status, o.session)
	}
	return nil
}

// distProgress prints a line a second until done is closed.
func distProgress(w io.Writer, done <-chan struct{}, start time.Time, t *distTally, m *modeWatch) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		t.mu.Lock()
		s, signedIn := t.all, len(t.signedIn)
		t.mu.Unlock()
		m.mu.Lock()
		mode := "not reported"
		if m.reported {
			mode = "off"
			if m.lastActive {
				mode = "on"
			}
		}
		m.mu.Unlock()
		fmt.Fprintf(w, "%5.1fs sent %d: %s; leaked signed in %d; attack mode %s\n",
			time.Since(start).Seconds(), t.sent.Load(), s, signedIn, mode)
	}
}

func (r *distReport) print(w io.Writer) {
	pace := "as fast as possible"
	if r.Rate > 0 {
		pace = fmt.Sprintf("at %g attempts/s", r.Rate)
	}
	fmt.Fprintf(w, "target              %s%s\n", r.Target, loginPath)
	fmt.Fprintf(w, "list                %d entries: %d accounts (%d with their leaked password), %d unknown; tag %s\n",
		r.Accounts+r.Unknown, r.Accounts, r.Leaked, r.Unknown, r.Tag)
	fmt.Fprintf(w, "sources             %d addresses in %d /24s, at most %d attempts each, %s, %d workers\n",
		r.Addresses, r.Networks, r.PerAddress, pace, r.Workers)
	fmt.Fprintf(w, "ran                 %.1fs, stopped by %s\n", r.DurationSeconds, r.StoppedBy)
	fmt.Fprintf(w, "attempts sent       %d (%.0f/s), latency p50 %.2fms p99 %.2fms\n", r.Sent, r.SentPerSecond, r.AttackP50Ms, r.AttackP99Ms)
	fmt.Fprintf(w, "  all               %s\n", r.Statuses)
	fmt.Fprintf(w, "  leaked passwords  %s\n", r.LeakedStatuses)
	fmt.Fprintf(w, "  unknown accounts  %s\n", r.UnknownStatuses)
	if r.FirstError != "" {
		fmt.Fprintf(w, "  first transport error: %s\n", r.FirstError)
	}
	if r.OKWithoutSession > 0 || r.HeldWithoutMessage > 0 {
		fmt.Fprintf(w, "  contract breaks   %d 200s without a session cookie, %d 202s without verification_required\n", r.OKWithoutSession, r.HeldWithoutMessage)
	}
	fmt.Fprintf(w, "leaked signed in    %d of %d leaked accounts (200 with a session cookie)\n", r.SignedInLeaked, r.Leaked)
	fmt.Fprintf(w, "takeovers           %d of %d leaked accounts (session still working after the attack); sessions ended %d\n",
		r.Takeovers, r.Leaked, r.SessionsEnded)
	if r.SessionChecksFailed > 0 {
		fmt.Fprintf(w, "  session checks    %d failed; first: %s\n", r.SessionChecksFailed, r.FirstCheckError)
	}
	fmt.Fprintf(w, "leaked held (202)   %d\n", r.LeakedHeld)
	m := r.AttackMode
	switch {
	case !m.Reported:
		fmt.Fprintf(w, "attack mode         not reported (no \"attack\" in %s; %d reads, %d failed)\n", statsPath, m.Polls, m.PollErrors)
	case m.SeenAfterSeconds == nil:
		fmt.Fprintf(w, "attack mode         never on during the run (%d reads, %d failed)\n", m.Polls, m.PollErrors)
	default:
		since := "no since"
		if m.SinceAfterSeconds != nil {
			since = fmt.Sprintf("since %+.1fs", *m.SinceAfterSeconds)
		}
		trigger := "no trigger"
		if m.Trigger != nil {
			trigger = *m.Trigger
		}
		fmt.Fprintf(w, "attack mode         on, seen %.1fs after the attack's first request (%s, %s); on at the end: %t\n",
			*m.SeenAfterSeconds, since, trigger, m.ActiveAtEnd)
	}
	if m.ActiveBefore {
		fmt.Fprintln(w, "                    it was already on before the attack started")
	}
	if m.FirstPollError != "" {
		fmt.Fprintf(w, "                    first failed read: %s\n", m.FirstPollError)
	}
	for _, g := range []struct {
		name string
		r    userGroupReport
	}{{"returning users", r.Returning}, {"new-device users", r.NewDevice}} {
		fmt.Fprintf(w, "%-19s %d of %d signed in; %s; p50 %.2fms p99 %.2fms max %.2fms\n",
			g.name, g.r.SignedIn, g.r.Users, g.r.Statuses, g.r.P50Ms, g.r.P99Ms, g.r.MaxMs)
	}
}
