package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"embed"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	mathrand "math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/xcloak/xcloak/internal/cli"
	"github.com/xcloak/xcloak/web"
)

const compareDescription = `Measures a running XCloak's answers per second against a bare Go handler
with wrk, interleaved: each round runs every contender once for --duration,
in an order shuffled with --seed, and the report gives per contender the
requests per second of each round, the median, the 99th percentile of
latency, the answers by status, and the median of the per-round ratios to
the bare handler. On a machine shared with other work a quiet or a noisy
moment then touches every contender alike.

Contenders (--contenders):
  hello         a bare Go handler this command serves itself: 200 "hello"
                to GET /
  hello-post    the same bare handler sent the rejections' request, a POST
                of the JSON sign-in (wrk/login.lua): rejections are also
                given as a ratio to it, XCloak's rejection over net/http's
                answer to the same request
  hello-429     the bare handler sent the rejections' request and answering
                it as XCloak does: the status, headers and body of the 429
                the check read from --target, served with XCloak's own
                connection bounds (web.NewHTTPServer): what net/http alone
                costs for the exchange a rejection is, so that rejections'
                ratio to it is the share of XCloak's own work
  rejections    XCloak's JSON sign-in for one account past its limit (429s),
                wrk/login.lua; the account is driven past its limit first
  rejections-form
                the same through the HTML form, POST /login (429 pages),
                wrk/form.lua
  forward-auth  GET /api/v1/authz/forward-auth of a protected host with a
                signed-in browser's cookies (200s), wrk/forward-auth.lua
  auth-request  the same through nginx's GET /api/v1/authz/auth-request
  decision      POST /api/v1/attempts, each for a new account and client
                address, so every answer is an allow (200), wrk/decision.lua

forward-auth and auth-request need a session: --cookie, or --email and
--password of an account this command signs in as (XCloak must list --host
in XCLOAK_PROTECTED_HOSTS, and 127.0.0.1 in XCLOAK_TRUSTED_PROXIES). decision
needs --api-key, made with "xcloak apikey add". Each contender is checked
with one request before the rounds start. Needs wrk (apt-get install -y wrk).

--before names a second XCloak, another build serving the same database,
whose contenders run in the same rounds as "before/NAME": a before and
after measured in one run, where a busy moment of the machine touches both
alike. Each target needs its own key prefix (XCLOAK_KEY_PREFIX), so that
one's rejections are not the other's.
`

// wrkScripts are the wrk scripts, written to a temporary directory for
// each comparison: status.lua is loaded by the others from beside them.
//
//go:embed wrk/*.lua
var wrkScripts embed.FS

// Contender names.
const (
	contenderHello       = "hello"
	contenderHelloPost   = "hello-post"
	contenderHello429    = "hello-429"
	contenderRejections  = "rejections"
	contenderRejectForm  = "rejections-form"
	contenderForwardAuth = "forward-auth"
	contenderAuthRequest = "auth-request"
	contenderDecision    = "decision"
)

var contenderNames = []string{contenderHello, contenderHelloPost, contenderHello429, contenderRejections, contenderRejectForm, contenderForwardAuth, contenderAuthRequest, contenderDecision}

// expectedAnswers is the answer every request of each contender should
// get, as the wrk scripts count it.
var expectedAnswers = map[string]string{
	contenderHello:       "200",
	contenderHelloPost:   "200",
	contenderHello429:    "429",
	contenderRejections:  "429",
	contenderRejectForm:  "429",
	contenderForwardAuth: "200",
	contenderAuthRequest: "200",
	contenderDecision:    "200 allow",
}

// sameRequest names, for a contender, the bare handler's contender sent
// the same requests, and sameAnswer the one that also answers them as
// the contender does; the report gives its ratio to each as well.
var (
	sameRequest = map[string]string{contenderRejections: contenderHelloPost}
	sameAnswer  = map[string]string{contenderRejections: contenderHello429}
)

// bare reports whether contender kind is the bare handler's, served by
// this command rather than by a target.
func bare(kind string) bool {
	return kind == contenderHello || kind == contenderHelloPost || kind == contenderHello429
}

// decisionBlock is how many attempts one wrk thread of decision.lua may
// send in a run: the next run starts threads*decisionBlock further on.
const decisionBlock = 1 << 22

// compareConfig is one comparison, as the flags gave it.
type compareConfig struct {
	target         *url.URL
	before         *url.URL // a second XCloak, or nil
	contenders     []string
	rounds         int
	duration       time.Duration
	threads        int
	connections    int
	seed           uint64
	wrk            string
	cookie         string
	email          string
	password       string
	host           string
	apiKey         string
	victim         string
	requestTimeout time.Duration
	allow          bool
}

func compareCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("stuffing", "compare", "--target URL [flags]", compareDescription)
	var c compareConfig
	target := fs.String("target", "", "base `URL` of the running XCloak, such as http://127.0.0.1:18080 (required)")
	before := fs.String("before", "", "base `URL` of a second XCloak, another build, whose contenders run in the same rounds as before/NAME")
	contenders := stringList{contenderHello, contenderHelloPost, contenderHello429, contenderRejections, contenderForwardAuth, contenderDecision}
	fs.Var(&contenders, "contenders", "comma-separated `names` to run, hello among them")
	fs.IntVar(&c.rounds, "rounds", 5, "rounds, each running every contender once (`n`)")
	fs.DurationVar(&c.duration, "duration", 3*time.Second, "how long each contender runs in each round, whole seconds (1s to 1m)")
	fs.IntVar(&c.threads, "threads", 2, "wrk threads (-t)")
	fs.IntVar(&c.connections, "connections", 64, "wrk connections (-c), shared by the threads")
	fs.Uint64Var(&c.seed, "seed", 0, "seed of the rounds' order; 0 picks one, which the report prints")
	fs.StringVar(&c.wrk, "wrk", "wrk", "wrk `program` to run")
	fs.StringVar(&c.cookie, "cookie", "", "Cookie `header` of a signed-in browser, for forward-auth and auth-request")
	fs.StringVar(&c.email, "email", "", "`email` of an account to sign in as, instead of --cookie")
	fs.StringVar(&c.password, "password", "", "`password` of that account")
	fs.StringVar(&c.host, "host", "app.example.com", "protected `host` forward-auth asks about; one of XCLOAK_PROTECTED_HOSTS")
	fs.StringVar(&c.apiKey, "api-key", "", "API `key` for decision, from xcloak apikey add")
	fs.StringVar(&c.victim, "rejections-email", "compare-victim@example.com", "account `email` rejections signs in to; need not exist")
	fs.DurationVar(&c.requestTimeout, "request-timeout", 10*time.Second, "bound on each request of the checks before the rounds")
	jsonOut := fs.Bool("json", false, "print the report as JSON; progress goes to stderr")
	fs.BoolVar(&c.allow, "allow-non-loopback", false, "allow a target that is not on this machine's loopback")
	if err := cli.Parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	c.contenders = contenders
	if err := c.check(*target); err != nil {
		return badFlag(stderr, "%v", err)
	}
	wrkPath, err := exec.LookPath(c.wrk)
	if err != nil {
		return fmt.Errorf("wrk not found (%v): install it with apt-get install -y wrk, or give its path with --wrk", err)
	}
	c.wrk = wrkPath
	u, err := checkTarget(ctx, *target, c.allow)
	if err != nil {
		return err
	}
	c.target = u
	if *before != "" {
		b, err := checkTarget(ctx, *before, c.allow)
		if err != nil {
			return fmt.Errorf("--before: %w", err)
		}
		if b.String() == u.String() {
			return badFlag(stderr, "--before %s is --target itself", b)
		}
		c.before = b
	}
	if c.seed == 0 {
		c.seed = randomUint64()%1_000_000_000 + 1
	}

	progress := stdout
	if *jsonOut {
		progress = stderr
	}
	rep, err := compare(ctx, c, progress)
	if err != nil {
		return err
	}
	if *jsonOut {
		return writeJSON(stdout, rep)
	}
	fmt.Fprintln(stdout)
	rep.print(stdout)
	return nil
}

// check validates the flags that need no network.
func (c *compareConfig) check(target string) error {
	switch {
	case target == "":
		return errors.New("--target is required")
	case c.rounds < 1 || c.rounds > maxTrials:
		return fmt.Errorf("--rounds %d out of range 1..%d", c.rounds, maxTrials)
	case c.duration%time.Second != 0:
		return fmt.Errorf("--duration %s: wrk takes whole seconds", c.duration)
	case c.threads < 1 || c.threads > 64:
		return fmt.Errorf("--threads %d out of range 1..64", c.threads)
	case c.connections < c.threads || c.connections > maxConcurrency:
		return fmt.Errorf("--connections %d out of range %d..%d (at least one per thread)", c.connections, c.threads, maxConcurrency)
	case (c.email == "") != (c.password == ""):
		return errors.New("--email and --password go together")
	case c.cookie != "" && c.email != "":
		return errors.New("--cookie or --email, not both")
	case strings.ContainsAny(c.cookie+c.apiKey+c.host+c.victim, "\r\n"):
		return errors.New("--cookie, --api-key, --host and --rejections-email are single lines")
	case c.host == "" || strings.ContainsAny(c.host, "/ "):
		return fmt.Errorf("--host %q: want a host name", c.host)
	}
	if err := inBounds("duration", c.duration, time.Second, time.Minute); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, name := range c.contenders {
		if !slices.Contains(contenderNames, name) {
			return fmt.Errorf("--contenders: unknown %q (known: %s)", name, strings.Join(contenderNames, ", "))
		}
		if seen[name] {
			return fmt.Errorf("--contenders: %q twice", name)
		}
		seen[name] = true
	}
	switch {
	case !seen[contenderHello]:
		return errors.New("--contenders: hello is the baseline every ratio is to; include it")
	case (seen[contenderForwardAuth] || seen[contenderAuthRequest]) && c.cookie == "" && c.email == "":
		return errors.New("forward-auth and auth-request need a session: give --cookie, or --email and --password (or leave them out of --contenders)")
	case seen[contenderDecision] && c.apiKey == "":
		return errors.New("decision needs --api-key, from xcloak apikey add (or leave it out of --contenders)")
	}
	return nil
}

// comparison is a comparison under way: where each contender is and what
// its wrk runs need.
type comparison struct {
	c        compareConfig
	scripts  string // directory holding the wrk scripts
	helloURL string
	// answerURL serves hello-429 once its check has read the answer
	// it repeats; stopAnswer stops it.
	answerURL  string
	stopAnswer func()
	tag        string // keeps decision's accounts apart from other runs'
	nextBase   uint64 // decision.lua's STUFFING_BASE for its next run
	client     *http.Client
	// entries are the contenders of every target, by name.
	entries map[string]contenderEntry
}

// xcloakTarget is one XCloak that contenders run against.
type xcloakTarget struct {
	url       *url.URL
	wrkTarget string // url with its host replaced by the address checked
	cookie    string
}

// contenderEntry is one contender as the rounds name it: what it runs, against
// which XCloak (nil for hello).
type contenderEntry struct {
	kind   string
	target *xcloakTarget
}

// compare prepares every contender, checks each with one request, then
// runs the rounds. A signal stops the wrk under way; the report is then of
// the runs that had completed.
func compare(ctx context.Context, c compareConfig, progress io.Writer) (*compareReport, error) {
	cmp := &comparison{
		c:      c,
		tag:    fmt.Sprintf("compare-%08x", uint32(randomUint64())),
		client: sourceClient(netip.Addr{}, nil, 4, c.allow, c.requestTimeout),
	}
	cmp.nextBase = randomUint64() % (1 << 40)

	dir, err := os.MkdirTemp("", "stuffing-compare-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := writeScripts(dir); err != nil {
		return nil, err
	}
	cmp.scripts = dir

	targets := map[string]*xcloakTarget{"": {url: c.target}}
	if c.before != nil {
		targets[beforePrefix] = &xcloakTarget{url: c.before}
	}
	for _, t := range targets {
		addr, err := wrkAddress(ctx, t.url, c.allow)
		if err != nil {
			return nil, err
		}
		t.wrkTarget = addr
	}
	names := contenderEntries(c.contenders, c.before != nil)
	cmp.entries = map[string]contenderEntry{}
	for _, name := range names {
		kind, prefix := name, ""
		if k, ok := strings.CutPrefix(name, beforePrefix); ok {
			kind, prefix = k, beforePrefix
		}
		e := contenderEntry{kind: kind}
		if !bare(kind) {
			e.target = targets[prefix]
		}
		cmp.entries[name] = e
	}

	helloURL, stopHello, err := serveLoopback(&http.Server{Handler: helloHandler(), ReadHeaderTimeout: 10 * time.Second})
	if err != nil {
		return nil, err
	}
	defer stopHello()
	cmp.helloURL = helloURL
	defer func() {
		if cmp.stopAnswer != nil {
			cmp.stopAnswer()
		}
	}()

	for _, name := range names {
		fmt.Fprintf(progress, "checking %s... ", name)
		note, err := cmp.prepare(ctx, name)
		if err != nil {
			fmt.Fprintln(progress, "failed")
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		fmt.Fprintln(progress, note)
	}

	target := c.target.String()
	if c.before != nil {
		target += ", before: " + c.before.String()
	}
	rep := &compareReport{
		Target: target, Seed: c.seed, Threads: c.threads, Connections: c.connections,
		Duration: c.duration.String(), Baseline: contenderHello, CPUs: runtime.NumCPU(), LoadBefore: loadAverage(),
	}
	rng := mathrand.New(mathrand.NewPCG(c.seed, c.seed))
rounds:
	for i := range c.rounds {
		order := slices.Clone(names)
		rng.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
		round := compareRound{Results: map[string]wrkResult{}}
		for _, name := range order {
			res, err := cmp.run(ctx, name)
			if ctx.Err() != nil {
				rep.Interrupted = true
				if len(round.Results) > 0 {
					rep.Rounds = append(rep.Rounds, round)
				}
				break rounds
			}
			if err != nil {
				return nil, fmt.Errorf("round %d, %s: %w", i+1, name, err)
			}
			round.Order = append(round.Order, name)
			round.Results[name] = res
			fmt.Fprintf(progress, "round %d/%d  %-13s %9s/s  p99 %s\n", i+1, c.rounds, name, thousands(res.RPS), millis(res.P99))
		}
		rep.Rounds = append(rep.Rounds, round)
	}
	rep.LoadAfter = loadAverage()
	expected := map[string]string{}
	for name, e := range cmp.entries {
		expected[name] = expectedAnswers[e.kind]
	}
	rep.Contenders = summarize(rep.Rounds, names, contenderHello, expected)
	return rep, nil
}

// beforePrefix names the contenders of --before.
const beforePrefix = "before/"

// contenderEntries are the names the rounds run: the contenders, and with
// a second target each of them but the bare handler's again as
// before/NAME.
func contenderEntries(contenders []string, before bool) []string {
	names := slices.Clone(contenders)
	if before {
		for _, name := range contenders {
			if !bare(name) {
				names = append(names, beforePrefix+name)
			}
		}
	}
	return names
}

// prepare readies one contender and checks that it answers as measured,
// so that a wrong key or an expired cookie stops the comparison before it
// measures errors. It returns what the check saw.
func (cmp *comparison) prepare(ctx context.Context, name string) (string, error) {
	e := cmp.entries[name]
	t := e.target
	switch e.kind {
	case contenderHello:
		resp, err := cmp.do(ctx, http.MethodGet, cmp.helloURL, nil, nil)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%d", resp.StatusCode), nil
	case contenderHelloPost:
		body, _ := json.Marshal(map[string]string{"email": cmp.c.victim, "password": "not-the-password"})
		resp, err := cmp.do(ctx, http.MethodPost, cmp.helloURL+loginPath, body,
			http.Header{"Content-Type": {"application/json"}})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%d", resp.StatusCode), nil
	case contenderHello429:
		return cmp.serveRejection(ctx)
	case contenderRejections, contenderRejectForm:
		_, note, err := cmp.exhaustVictim(ctx, t)
		return note, err
	case contenderForwardAuth, contenderAuthRequest:
		if t.cookie == "" {
			if err := cmp.signIn(ctx, t); err != nil {
				return "", err
			}
		}
		resp, err := cmp.do(ctx, http.MethodGet, t.url.JoinPath(authzPath(e.kind)).String(), nil, cmp.authzHeaders(t, e.kind))
		if err != nil {
			return "", err
		}
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("answered %d %s to a signed-in browser, want 200: check the session (--cookie, --email), that XCLOAK_PROTECTED_HOSTS has %s and that XCLOAK_TRUSTED_PROXIES has 127.0.0.1",
				resp.StatusCode, resp.header("Location"), cmp.c.host)
		}
		return fmt.Sprintf("200, Remote-User %q", resp.header("Remote-User")), nil
	case contenderDecision:
		body := decisionAttempt(cmp.tag, cmp.nextBase)
		cmp.nextBase = (cmp.nextBase + decisionBlock) % (1 << 40)
		resp, err := cmp.do(ctx, http.MethodPost, t.url.JoinPath(attemptsPath).String(), []byte(body),
			http.Header{"Authorization": {"Bearer " + cmp.c.apiKey}, "Content-Type": {"application/json"}})
		if err != nil {
			return "", err
		}
		var v struct {
			Decision string `json:"decision"`
		}
		_ = json.Unmarshal(resp.body, &v)
		if resp.StatusCode != http.StatusOK || v.Decision == "" {
			return "", fmt.Errorf("answered %d %s to %s, want 200 with a decision", resp.StatusCode, bytes.TrimSpace(resp.body), body)
		}
		return fmt.Sprintf("200, decision %q", v.Decision), nil
	}
	return "", fmt.Errorf("unknown contender %q", name)
}

// Paths of the routes measured.
const (
	attemptsPath    = "/api/v1/attempts"
	forwardAuthPath = "/api/v1/authz/forward-auth"
	authRequestPath = "/api/v1/authz/auth-request"
)

func authzPath(name string) string {
	if name == contenderAuthRequest {
		return authRequestPath
	}
	return forwardAuthPath
}

// authzHeaders are what a reverse proxy sends with its question, as
// forward-auth.lua sends them.
func (cmp *comparison) authzHeaders(t *xcloakTarget, name string) http.Header {
	h := http.Header{"Cookie": {t.cookie}}
	if name == contenderAuthRequest {
		h.Set("X-Original-URL", "https://"+cmp.c.host+"/")
		return h
	}
	h.Set("X-Forwarded-Method", "GET")
	h.Set("X-Forwarded-Proto", "https")
	h.Set("X-Forwarded-Host", cmp.c.host)
	h.Set("X-Forwarded-Uri", "/")
	return h
}

// decisionAttempt is the body decision.lua sends as attempt k of tag.
func decisionAttempt(tag string, k uint64) string {
	return fmt.Sprintf(`{"kind":"login","account":"%s-%d@example.com","client_ip":"fd%02x:%04x:%04x::1"}`,
		tag, k, k>>32&0xff, k>>16&0xffff, k&0xffff)
}

// signIn signs in as --email and keeps every cookie the answer sets, as a
// browser would send them back.
func (cmp *comparison) signIn(ctx context.Context, t *xcloakTarget) error {
	if cmp.c.cookie != "" {
		t.cookie = cmp.c.cookie
		return nil
	}
	body, _ := json.Marshal(map[string]string{"email": cmp.c.email, "password": cmp.c.password})
	resp, err := cmp.do(ctx, http.MethodPost, t.url.JoinPath(loginPath).String(), body,
		http.Header{"Content-Type": {"application/json"}})
	if err != nil {
		return err
	}
	switch {
	case resp.StatusCode == http.StatusAccepted:
		return fmt.Errorf("signing in as %s was held for new-device verification; sign in with a browser and give its cookies with --cookie", cmp.c.email)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("signing in as %s answered %d %s", cmp.c.email, resp.StatusCode, bytes.TrimSpace(resp.body))
	}
	var pairs []string
	for _, ck := range resp.cookies {
		if ck.Value != "" && ck.MaxAge >= 0 {
			pairs = append(pairs, ck.Name+"="+ck.Value)
		}
	}
	if len(pairs) == 0 {
		return fmt.Errorf("signing in as %s set no cookie", cmp.c.email)
	}
	t.cookie = strings.Join(pairs, "; ")
	return nil
}

// exhaustVictim signs in to --rejections-email with a wrong password until
// XCloak answers 429, so that every request of the rounds is a rejection,
// and returns that answer.
func (cmp *comparison) exhaustVictim(ctx context.Context, t *xcloakTarget) (answer, string, error) {
	body, _ := json.Marshal(map[string]string{"email": cmp.c.victim, "password": "not-the-password"})
	statuses := map[int]int{}
	for range 100 {
		resp, err := cmp.do(ctx, http.MethodPost, t.url.JoinPath(loginPath).String(), body,
			http.Header{"Content-Type": {"application/json"}})
		if err != nil {
			return answer{}, "", err
		}
		statuses[resp.StatusCode]++
		if resp.StatusCode == http.StatusTooManyRequests {
			return resp, fmt.Sprintf("429 after %d attempts", statuses[http.StatusUnauthorized]+1), nil
		}
		if resp.StatusCode != http.StatusUnauthorized {
			return answer{}, "", fmt.Errorf("sign-in to %s answered %d %s, want 401s then 429", cmp.c.victim, resp.StatusCode, bytes.TrimSpace(resp.body))
		}
	}
	return answer{}, "", fmt.Errorf("100 wrong passwords for %s, and still no 429", cmp.c.victim)
}

// serveRejection readies hello-429: it reads --target's answer to a
// rejected sign-in, serves it again from a bare handler, and checks that
// the handler answers as XCloak did.
func (cmp *comparison) serveRejection(ctx context.Context) (string, error) {
	want, _, err := cmp.exhaustVictim(ctx, &xcloakTarget{url: cmp.c.target})
	if err != nil {
		return "", err
	}
	url, stop, err := serveLoopback(web.NewHTTPServer(answerHandler(want), nil))
	if err != nil {
		return "", err
	}
	cmp.answerURL, cmp.stopAnswer = url, stop
	body, _ := json.Marshal(map[string]string{"email": cmp.c.victim, "password": "not-the-password"})
	got, err := cmp.do(ctx, http.MethodPost, url+loginPath, body, http.Header{"Content-Type": {"application/json"}})
	if err != nil {
		return "", err
	}
	var names []string
	for name, v := range want.headers {
		if name != "Date" {
			names = append(names, name)
			if !slices.Equal(got.headers[name], v) {
				return "", fmt.Errorf("the bare handler answered %s %q, want XCloak's %q", name, got.headers[name], v)
			}
		}
	}
	if got.StatusCode != want.StatusCode || !bytes.Equal(got.body, want.body) {
		return "", fmt.Errorf("the bare handler answered %d %q, want XCloak's %d %q", got.StatusCode, got.body, want.StatusCode, want.body)
	}
	slices.Sort(names)
	return fmt.Sprintf("%d with %s and XCloak's body", got.StatusCode, strings.Join(names, ", ")), nil
}

// run runs one contender once with wrk.
func (cmp *comparison) run(ctx context.Context, name string) (wrkResult, error) {
	e := cmp.entries[name]
	script, target := "status.lua", cmp.helloURL
	if e.target != nil {
		target = e.target.wrkTarget
	}
	env := os.Environ()
	switch e.kind {
	case contenderRejections, contenderHelloPost:
		script = "login.lua"
		env = append(env, "STUFFING_EMAIL="+cmp.c.victim)
	case contenderHello429:
		script, target = "login.lua", cmp.answerURL
		env = append(env, "STUFFING_EMAIL="+cmp.c.victim)
	case contenderRejectForm:
		script = "form.lua"
		env = append(env, "STUFFING_EMAIL="+cmp.c.victim)
	case contenderForwardAuth, contenderAuthRequest:
		script = "forward-auth.lua"
		env = append(env, "STUFFING_COOKIE="+e.target.cookie, "STUFFING_HOST="+cmp.c.host, "STUFFING_AUTHZ="+e.kind)
	case contenderDecision:
		script = "decision.lua"
		env = append(env, "STUFFING_API_KEY="+cmp.c.apiKey, "STUFFING_TAG="+cmp.tag,
			"STUFFING_BASE="+strconv.FormatUint(cmp.nextBase, 10))
		cmp.nextBase = (cmp.nextBase + uint64(cmp.c.threads)*decisionBlock) % (1 << 40)
	}
	cmd := exec.CommandContext(ctx, cmp.c.wrk,
		"-t"+strconv.Itoa(cmp.c.threads), "-c"+strconv.Itoa(cmp.c.connections),
		"-d"+strconv.Itoa(int(cmp.c.duration/time.Second))+"s", "--latency",
		"-s", filepath.Join(cmp.scripts, script), target)
	cmd.Env = env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return wrkResult{}, fmt.Errorf("wrk: %w: %s", err, bytes.TrimSpace(errOut.Bytes()))
	}
	res, err := parseWrk(out.String())
	if err != nil {
		return wrkResult{}, fmt.Errorf("%w; wrk printed:\n%s", err, out.String())
	}
	return res, nil
}

// answer is a response read whole, for the checks.
type answer struct {
	StatusCode int
	headers    http.Header
	cookies    []*http.Cookie
	body       []byte
}

func (a answer) header(name string) string { return a.headers.Get(name) }

func (cmp *comparison) do(ctx context.Context, method, url string, body []byte, h http.Header) (answer, error) {
	ctx, cancel := context.WithTimeout(ctx, cmp.c.requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	maps.Copy(req.Header, h)
	resp, err := cmp.client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return answer{}, err
	}
	return answer{StatusCode: resp.StatusCode, headers: resp.Header, cookies: resp.Cookies(), body: b}, nil
}

// wrkAddress is the target with its host replaced by the address the
// loopback check passed, so that wrk, which resolves names itself, goes
// where the check looked.
func wrkAddress(ctx context.Context, target *url.URL, allow bool) (string, error) {
	addrs, err := resolveHost(ctx, target.Hostname(), allow)
	if err != nil {
		return "", err
	}
	port := target.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[target.Scheme]
	}
	u := *target
	u.Host = net.JoinHostPort(addrs[0].String(), port)
	u.Path = ""
	return u.String(), nil
}

// serveLoopback serves srv on a free loopback port: the bare handler's
// contenders, helloHandler with a header timeout, and answerHandler with
// the connection bounds XCloak serves with (web.NewHTTPServer).
func serveLoopback(srv *http.Server) (url string, stop func(), err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	go func() { _ = srv.Serve(l) }()
	return "http://" + l.Addr().String(), func() { _ = srv.Close() }, nil
}

// writeScripts copies the embedded wrk scripts into dir.
func writeScripts(dir string) error {
	return fs.WalkDir(wrkScripts, "wrk", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := wrkScripts.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, d.Name()), b, 0o600)
	})
}

// loadAverage is the first three fields of /proc/loadavg, or "unknown".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

func randomUint64() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:]) | 1
}
