package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DefaultTimeout bounds one call, connection and answer included, when
// neither [WithTimeout] nor the caller's context says otherwise. A sign-in
// waits for it, so it is short; XCloak answers a decision in milliseconds.
const DefaultTimeout = 5 * time.Second

// maxAnswerBytes bounds what is read of an answer's body, and of its
// headers with the Client's own transport. XCloak's answers are under a
// hundred bytes; anything this long is not XCloak.
const maxAnswerBytes = 64 << 10

// Client calls one XCloak's decision API with one API key.
type Client struct {
	base *url.URL
	// auth gives the Authorization header's value. A closure, because fmt
	// prints a func as an address: no printing of a Client, or of a struct
	// holding one, by reflection can show the key.
	auth    func() string
	http    *http.Client
	timeout time.Duration
}

// An Option adjusts a Client made by [New].
type Option func(*Client)

// WithHTTPClient makes the Client send its requests through hc (a
// transport with its own TLS settings or proxy, say): its transport, cookie
// jar and timeout (the transport's MaxResponseHeaderBytes then bounds the
// answers' headers, which the Client's own transport holds to 64 KiB). Its redirect policy is not used: the Client follows no
// redirect, whatever hc's CheckRedirect (nil, Go's default, follows ten and
// keeps the Authorization header for the same host on any port or scheme
// and for its subdomains). hc itself is left unchanged.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) { c.http = hc }
}

// WithTimeout bounds every call to d instead of [DefaultTimeout]; d <= 0
// leaves calls bounded by their context alone.
func WithTimeout(d time.Duration) Option {
	return func(c *Client) { c.timeout = d }
}

// New returns a Client of the XCloak at baseURL (its public URL, such as
// "https://login.example.com", a path prefix included if XCloak is served
// under one) that authenticates with apiKey, as printed by
// `xcloak apikey add`.
func New(baseURL, apiKey string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(baseURL, "#") {
		return nil, fmt.Errorf("xcloak client: base URL %s: want an absolute http or https URL without user, query or fragment", shownURL(baseURL))
	}
	// The path as written, escapes included (a proxy in front may route
	// by them), without the trailing slashes that would put an empty
	// segment before the API's path.
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = strings.TrimRight(u.RawPath, "/")
	// White space or a control character in the key would split or end
	// the header, or have net/http refuse it on every call.
	if apiKey == "" || strings.ContainsFunc(apiKey, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return nil, errors.New("xcloak client: the API key is empty or holds white space or control characters")
	}
	c := &Client{
		base:    u,
		auth:    func() string { return "Bearer " + apiKey },
		timeout: DefaultTimeout,
		http:    &http.Client{Transport: boundedTransport()},
	}
	for _, o := range opts {
		o(c)
	}
	if c.http == nil {
		return nil, errors.New("xcloak client: WithHTTPClient(nil)")
	}
	// A redirect is never XCloak's answer to these calls: following one
	// would send the key and the attempt elsewhere, turn a POST into a GET,
	// and take another server's answer for a decision. A copy, so that a
	// caller's client keeps its own policy for its other uses.
	hc := *c.http
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c.http = &hc
	return c, nil
}

// shownURL is what an error about the base URL s quotes of it: s itself,
// unless it names a user, whose name or password may be a secret (the
// API key pasted there), or holds what looks like an API key (the
// arguments of New swapped, or the key in a query): then its scheme and
// host alone, or nothing when those would show it.
func shownURL(s string) string {
	u, err := url.Parse(s)
	hasUser := strings.Contains(s, "@") && (err != nil || u.User != nil)
	hasKey := strings.Contains(s, apiKeyPrefix)
	switch {
	case !hasUser && !hasKey:
		return strconv.Quote(s)
	case err == nil && u.Host != "" && !strings.Contains(u.Scheme+"://"+u.Host, apiKeyPrefix):
		if hasUser {
			return strconv.Quote(u.Scheme+"://"+u.Host) + " (its user left out)"
		}
		return strconv.Quote(u.Scheme+"://"+u.Host) + " (the rest left out: it may hold an API key)"
	}
	return "(left out: it may hold a user and password or an API key)"
}

// apiKeyPrefix begins every key `xcloak apikey add` prints.
const apiKeyPrefix = "xck_"

// boundedTransport is net/http's default transport, but reading no more
// than maxAnswerBytes of an answer's headers, where the default reads up
// to 10 MB on every call.
func boundedTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxResponseHeaderBytes = maxAnswerBytes
	return t
}

// String describes the Client, without its key.
func (c *Client) String() string { return "xcloak client for " + c.base.String() }

// answer is a read answer: its status, headers and (bounded) body.
type answer struct {
	status int
	header http.Header
	body   []byte
	// auth is the Client's, for shown: what the answer holds of the key
	// it was sent with, no error of it repeats.
	auth func() string
}

// post sends body as JSON to path (below the base URL, escaped) and reads
// the answer. It never retries: see [Client.Attempt].
func (c *Client) post(ctx context.Context, path string, body any) (answer, error) {
	payload, err := json.Marshal(body)
	if err != nil {
		return answer{}, fmt.Errorf("xcloak client: encoding the request: %w", err)
	}
	caller := ctx
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base.String()+path, bytes.NewReader(payload))
	if err != nil {
		return answer{}, fmt.Errorf("xcloak client: %w", err)
	}
	req.Header.Set("Authorization", c.auth())
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		// *url.Error names the method and URL, never the headers.
		return answer{}, unanswered(caller, fmt.Errorf("xcloak client: %w", err))
	}
	defer resp.Body.Close()
	// A 101 Switching Protocols hands over the bare connection as the
	// body, which the request's context no longer bounds: closed when the
	// call's time is up, so that a silent one cannot hold the sign-in.
	defer context.AfterFunc(ctx, func() { resp.Body.Close() })()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return answer{}, unanswered(caller, fmt.Errorf("xcloak client: reading the answer to %s: %w", path, err))
	}
	if len(b) > maxAnswerBytes {
		return answer{}, &StatusError{StatusCode: resp.StatusCode, Detail: fmt.Sprintf("answer longer than %d bytes", maxAnswerBytes)}
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b, auth: c.auth}, nil
}
