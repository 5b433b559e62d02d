package breached

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/xcloak/xcloak/internal/urlport"
)

// Checker tells whether a password is in a breach corpus.
type Checker interface {
	// Breached reports whether password is in the corpus. An error means
	// the corpus could not be read in time: the answer is unknown.
	Breached(ctx context.Context, password string) (bool, error)
}

// DefaultTimeout bounds a lookup when Open is given none.
const DefaultTimeout = 500 * time.Millisecond

// maxRangeBytes bounds what one range may take to read. The public ranges
// hold about a thousand lines of 40 bytes, padding included; a file or an
// answer past this is refused as broken rather than read on.
const maxRangeBytes = 1 << 20

// maxHeaderBytes bounds the headers of a range API's answer, which the
// public API keeps to a few kilobytes.
const maxHeaderBytes = 64 << 10

// ErrRangeTooLarge: a range file or answer went past maxRangeBytes.
var ErrRangeTooLarge = errors.New("breached: range larger than 1 MiB")

// ErrNotARange: a range file or answer that is not a range: a line that
// is not a 35-digit hex suffix, a colon and a count, or nothing at all. No
// real range is empty, padded or not (each of the 16^5 prefixes is shared
// by hundreds of breached passwords), so an empty one is a download or a
// mirror gone wrong rather than a prefix of no breach; an HTML page
// answered with 200 is a URL that names no range API. Either would say
// "not breached" of every password.
var ErrNotARange = errors.New("breached: not a range")

// formError says how a range is not one; it is an ErrNotARange.
type formError struct{ why string }

func (e formError) Error() string        { return e.why }
func (e formError) Is(target error) bool { return target == ErrNotARange }

// Open returns the Checker that source names, each lookup bounded by
// timeout (zero or less: DefaultTimeout), or nil for an empty source (no
// checking). An http:// or https:// URL is a range API's base; anything
// else is the path of a directory of range files, which must exist, be
// readable and hold a range file (ABCDE.txt or ABCDE) that reads as a
// range: an empty directory, or one of other files, would find no
// password breached. The API is reached through client (nil: a client of
// its own, which reads at most 64 KiB of an answer's headers), never
// following a redirect; what it answers is checked at each
// lookup, an answer that is no range being an ErrNotARange.
func Open(source string, timeout time.Duration, client *http.Client) (Checker, error) {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	switch {
	case source == "":
		return nil, nil
	case strings.HasPrefix(source, "http://"), strings.HasPrefix(source, "https://"):
		api, err := newAPI(source, client)
		if err != nil {
			return nil, err
		}
		return bounded{api, timeout}, nil
	case strings.Contains(source, "://"):
		return nil, errors.New("breached: a URL must be http(s); anything else names a directory")
	default:
		dir, err := newDir(source)
		if err != nil {
			return nil, err
		}
		return bounded{dir, timeout}, nil
	}
}

// bounded gives every lookup of its Checker timeout at most.
type bounded struct {
	c       Checker
	timeout time.Duration
}

func (b bounded) Breached(ctx context.Context, password string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	return b.c.Breached(ctx, password)
}

// split returns the upper-case hex SHA-1 of password, cut into the prefix
// that is looked up and the suffix that is compared. The password is
// hashed as given, its UTF-8 bytes, as the corpus hashes them.
func split(password string) (prefix, suffix string) {
	sum := sha1.Sum([]byte(password))
	h := strings.ToUpper(hex.EncodeToString(sum[:]))
	return h[:5], h[5:]
}

// readFailed is the error of a range's read that failed with err. Once
// ctx is done it is ctx's: net/http closes the connection when the
// deadline passes, and the read in flight may then fail with the closed
// connection's error rather than the deadline's.
func readFailed(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		err = cerr
	}
	return fmt.Errorf("breached: reading range: %w", pathless(err))
}

// findSuffix reads a range, "SUFFIX:COUNT" lines ending in LF or CRLF,
// and reports whether suffix is on a line of count above zero. It reads
// at most maxRangeBytes and stops when ctx is done. A range that is not
// one, a line of another form or no line at all (blank lines aside), is a
// formError, so that a misplaced corpus is not taken for one that holds
// no breached password: lines are checked up to the suffix's own, and a
// range that does not hold it, all of them.
func findSuffix(ctx context.Context, r io.Reader, suffix string) (bool, error) {
	want := []byte(suffix)
	lr := &io.LimitedReader{R: r, N: maxRangeBytes + 1}
	rr := &readErr{r: lr}
	sc := bufio.NewScanner(rr)
	lines := 0
	for n := 1; sc.Scan(); n++ {
		if n%256 == 0 && ctx.Err() != nil {
			return false, ctx.Err()
		}
		// Bytes, not Text: a range is a thousand lines, and only one is
		// worth a string.
		line := bytes.TrimSuffix(sc.Bytes(), []byte("\r"))
		if len(line) == 0 {
			continue
		}
		s, count, ok := bytes.Cut(line, []byte(":"))
		positive, isCount := parseCount(bytes.TrimSpace(count))
		if !ok || !isHex(s, suffixLen) || !isCount {
			if lr.N <= 0 {
				// Read past the bound: the line may be one cut there.
				return false, ErrRangeTooLarge
			}
			if rr.err != nil {
				// The scanner hands over what it holds when a read fails:
				// a line cut by a timeout or a broken connection, which
				// says nothing of the range.
				return false, readFailed(ctx, rr.err)
			}
			return false, formError{fmt.Sprintf("line %d is not SUFFIX:COUNT (35 hex digits, a colon, a count)", n)}
		}
		lines++
		// Padding lines have count 0.
		if positive && bytes.EqualFold(s, want) {
			return true, nil
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return false, formError{"a line is longer than 64 KiB"}
		}
		return false, readFailed(ctx, err)
	}
	if lr.N <= 0 {
		return false, ErrRangeTooLarge
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if lines == 0 {
		return false, formError{"it is empty"}
	}
	return false, nil
}

// readErr is a reader that keeps the first error of its reads but EOF.
type readErr struct {
	r   io.Reader
	err error
}

func (e *readErr) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF && e.err == nil {
		e.err = err
	}
	return n, err
}

// The lengths of a range's parts: the prefix a file is named by and the
// suffix on each of its lines, in hex digits.
const (
	prefixLen = 5
	suffixLen = 35
)

// hexDigit holds the hex digits, in either case: a table, as a range
// has some 35,000 of them to check.
var hexDigit = func() (t [256]bool) {
	for _, c := range "0123456789ABCDEFabcdef" {
		t[c] = true
	}
	return t
}()

// isHex reports whether b is n hex digits, in either case.
func isHex(b []byte, n int) bool {
	if len(b) != n {
		return false
	}
	for _, c := range b {
		if !hexDigit[c] {
			return false
		}
	}
	return true
}

// parseCount reports whether b is a count, decimal digits, and whether it
// is above zero.
func parseCount(b []byte) (positive, ok bool) {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false, false
		}
		positive = positive || c != '0'
	}
	return positive, len(b) > 0
}

// isRangeName reports whether name is what a lookup opens: a prefix of 5
// upper-case hex digits, with ".txt" or without.
func isRangeName(name string) bool {
	prefix := strings.TrimSuffix(name, ".txt")
	return len(prefix) == prefixLen && strings.ToUpper(prefix) == prefix && isHex([]byte(prefix), prefixLen)
}

// dir reads ranges from a directory of files named by prefix.
type dir struct {
	path string
	// slots holds a token per read in flight, maxReads at most.
	slots chan struct{}
	// open opens a range file (openRange; tests stand in for a disk).
	open func(path string) (io.ReadCloser, error)
}

// maxReads bounds the range files one directory reads at once. A read of
// a disk file cannot be interrupted, so on a mount that hangs each lookup
// would leave one behind, with the thread it blocks, for as long as the
// mount hangs; at most maxReads are, and later lookups wait for one of
// them until their own bound. A healthy read takes well under a
// millisecond, so sixteen at once is ample.
const maxReads = 16

func newDir(path string) (dir, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return dir{}, fmt.Errorf("breached: directory of ranges: %w", err)
	}
	if !fi.IsDir() {
		return dir{}, fmt.Errorf("breached: %s is not a directory", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return dir{}, fmt.Errorf("breached: directory of ranges: %w", err)
	}
	defer f.Close()
	name, err := firstRange(f)
	if err != nil {
		return dir{}, err
	}
	// The range is read as a lookup reads it: a directory of pages, or of
	// the empty files a failed download leaves, would answer nothing.
	r, err := openRange(filepath.Join(path, name))
	if err != nil {
		return dir{}, fmt.Errorf("breached: range file %s: %w", name, pathless(err))
	}
	defer r.Close()
	if _, err := findSuffix(context.Background(), r, ""); err != nil {
		return dir{}, fmt.Errorf("breached: range file %s in %s is not a range: %w", name, path, err)
	}
	return dir{path: path, slots: make(chan struct{}, maxReads), open: openRange}, nil
}

// firstRange returns the name of a range file in the directory f, the
// first found, or an error saying that there is none: a directory without
// one would say "not breached" of every password.
func firstRange(f *os.File) (string, error) {
	for {
		entries, err := f.ReadDir(256)
		for _, e := range entries {
			if !isRangeName(e.Name()) || e.IsDir() {
				continue
			}
			if e.Type()&fs.ModeSymlink != 0 {
				fi, err := os.Stat(filepath.Join(f.Name(), e.Name()))
				if err != nil || !fi.Mode().IsRegular() {
					continue
				}
			} else if !e.Type().IsRegular() {
				continue
			}
			return e.Name(), nil
		}
		if errors.Is(err, io.EOF) {
			return "", fmt.Errorf("breached: directory of ranges %s holds no range files "+
				"(ABCDE.txt or ABCDE, 5 upper-case hex digits, as haveibeenpwned-downloader writes them)", f.Name())
		}
		if err != nil {
			return "", fmt.Errorf("breached: directory of ranges is not readable: %w", err)
		}
	}
}

// errNotRegular: a range file's name is taken by something else, a
// directory, a FIFO or a device.
var errNotRegular = errors.New("not a regular file")

// openRange opens the range file at path. It never waits on what is no
// regular file (a FIFO no one writes to, a device): it opens it without
// waiting, and refuses it.
func openRange(path string) (io.ReadCloser, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = errNotRegular
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Breached reads the range file of the password's prefix. A prefix with
// no file has no breached password. A slow disk does not hold the caller
// past ctx: the read goes on in a goroutine of its own, which stops at
// ctx's end unless a read of the disk holds it (see maxReads).
func (d dir) Breached(ctx context.Context, password string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("breached: reading range: %w", err)
	}
	prefix, suffix := split(password)
	select {
	case d.slots <- struct{}{}:
	case <-ctx.Done():
		return false, fmt.Errorf("breached: reading range: %w, waiting for one of the %d reads in flight", ctx.Err(), maxReads)
	}
	type answer struct {
		found bool
		err   error
	}
	done := make(chan answer, 1)
	go func() {
		defer func() { <-d.slots }()
		found, err := d.read(ctx, prefix, suffix)
		done <- answer{found, err}
	}()
	select {
	case a := <-done:
		return a.found, a.err
	case <-ctx.Done():
		return false, fmt.Errorf("breached: reading range: %w", ctx.Err())
	}
}

func (d dir) read(ctx context.Context, prefix, suffix string) (bool, error) {
	var r io.ReadCloser
	var err error
	for _, name := range []string{prefix + ".txt", prefix} {
		if r, err = d.open(filepath.Join(d.path, name)); !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("breached: opening range file: %w", pathless(err))
	}
	defer r.Close()
	found, err := findSuffix(ctx, r, suffix)
	if errors.Is(err, ErrNotARange) {
		err = fmt.Errorf("breached: range file is not a range: %w", err)
	}
	return found, err
}

// pathless drops the path from a file error: the path holds the prefix.
func pathless(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// api reads ranges from an HTTP range API.
type api struct {
	base   string // without a trailing slash
	client *http.Client
}

func newAPI(base string, client *http.Client) (api, error) {
	u, err := url.Parse(base)
	if err != nil {
		// Not net/url's error: it quotes the URL, and the escape or port
		// it stumbled on, any of which may hold a user and password.
		return api{}, errors.New("breached: range API URL is not a valid URL")
	}
	// A bare "?" (ForceQuery) would put the prefix in a query, and a bare
	// "#" is an empty fragment net/url keeps no trace of but the URL's
	// text; a port without a host would dial this machine.
	if (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.RawQuery != "" || u.ForceQuery ||
		u.Fragment != "" || strings.Contains(base, "#") || u.User != nil {
		return api{}, errors.New("breached: range API URL must be http(s)://host[/path], without user, query or fragment")
	}
	// net/url takes any digits as a port: with one no connection can use,
	// every lookup would fail, and no password being set would be checked.
	if !urlport.Valid(u.Port()) {
		return api{}, errors.New("breached: range API URL has a port out of 1 to 65535")
	}
	if client == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		// The default reads up to 10 MB of an answer's headers, ten times
		// the range's own bound, on every lookup.
		t.MaxResponseHeaderBytes = maxHeaderBytes
		client = &http.Client{Transport: t}
	}
	// A copy, so that the caller's client keeps its own policy: a redirect
	// could send the prefix where the operator did not choose, so an
	// answer that is not 200 is a failure instead, whatever the client.
	c := *client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return api{base: strings.TrimSuffix(u.String(), "/"), client: &c}, nil
}

// Breached asks the API for the range of the password's prefix.
func (a api) Breached(ctx context.Context, password string) (bool, error) {
	prefix, suffix := split(password)
	found, err := a.lookUp(ctx, prefix, suffix)
	if err != nil {
		err = withoutPrefix{err, prefix}
	}
	return found, err
}

// withoutPrefix is an error of a lookup whose text never holds the prefix
// looked up. The answer is the server's to word, and net/http quotes
// pieces of one it cannot use (a status code, a header line, a Location)
// in its errors: a mirror or a proxy that echoes the path it was asked
// for, in its reason phrase or a redirect, would otherwise have the
// prefix logged with the lookup's failure.
type withoutPrefix struct {
	err    error
	prefix string
}

func (e withoutPrefix) Error() string { return redact(e.err.Error(), e.prefix) }
func (e withoutPrefix) Unwrap() error { return e.err }

// redact replaces each occurrence of prefix in s, in either case, with as
// many '*'. prefix is ASCII hex digits, which no other byte folds to.
func redact(s, prefix string) string {
	var b []byte
	for i := 0; i+len(prefix) <= len(s); i++ {
		if !strings.EqualFold(s[i:i+len(prefix)], prefix) {
			continue
		}
		if b == nil {
			b = []byte(s)
		}
		copy(b[i:], strings.Repeat("*", len(prefix)))
		i += len(prefix) - 1
	}
	if b == nil {
		return s
	}
	return string(b)
}

func (a api) lookUp(ctx context.Context, prefix, suffix string) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+"/range/"+prefix, nil)
	if err != nil {
		return false, fmt.Errorf("breached: range request: %w", err)
	}
	req.Header.Set("Add-Padding", "true")
	req.Header.Set("User-Agent", "xcloak")
	resp, err := a.client.Do(req)
	if err != nil {
		// url.Error quotes the URL, which holds the prefix.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return false, fmt.Errorf("breached: range API: %w", err)
	}
	defer resp.Body.Close()
	// A 101 Switching Protocols hands over the bare connection as the
	// body, which the request's context no longer bounds: closed when the
	// lookup's time is up, so that a silent one cannot hold the sign-in.
	defer context.AfterFunc(ctx, func() { resp.Body.Close() })()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return false, fmt.Errorf("breached: range API answered %s", resp.Status)
	}
	found, err := findSuffix(ctx, resp.Body, suffix)
	if errors.Is(err, ErrNotARange) {
		err = fmt.Errorf("breached: range API answered %s with no range (is the URL the API's base, "+
			"such as https://api.pwnedpasswords.com?): %w", resp.Status, err)
	}
	return found, err
}
