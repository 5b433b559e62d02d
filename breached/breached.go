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
	"strconv"
	"strings"
	"time"
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

// ErrRangeTooLarge: a range file or answer went past maxRangeBytes.
var ErrRangeTooLarge = errors.New("breached: range larger than 1 MiB")

// Open returns the Checker that source names, each lookup bounded by
// timeout (zero or less: DefaultTimeout), or nil for an empty source (no
// checking). An http:// or https:// URL is a range API's base; anything
// else is the path of a directory of range files, which must exist and
// be readable. The API is reached through client (nil: a client of its
// own, which follows no redirect).
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

// findSuffix reads a range, "SUFFIX:COUNT" lines ending in LF or CRLF,
// and reports whether suffix is on a line of count above zero. It reads
// at most maxRangeBytes and stops when ctx is done.
func findSuffix(ctx context.Context, r io.Reader, suffix string) (bool, error) {
	want := []byte(suffix)
	lr := &io.LimitedReader{R: r, N: maxRangeBytes + 1}
	sc := bufio.NewScanner(lr)
	for n := 0; sc.Scan(); n++ {
		if n%256 == 0 && ctx.Err() != nil {
			return false, ctx.Err()
		}
		// Bytes, not Text: a range is a thousand lines, and only one is
		// worth a string.
		line := bytes.TrimSuffix(sc.Bytes(), []byte("\r"))
		s, count, ok := bytes.Cut(line, []byte(":"))
		if !ok || len(s) != len(suffix) || !bytes.EqualFold(s, want) {
			continue
		}
		// Padding lines have count 0; a count that is no number is no
		// breach either.
		if c, err := strconv.ParseUint(string(bytes.TrimSpace(count)), 10, 64); err == nil && c > 0 {
			return true, nil
		}
	}
	if err := sc.Err(); err != nil {
		return false, fmt.Errorf("breached: reading range: %w", pathless(err))
	}
	if lr.N <= 0 {
		return false, ErrRangeTooLarge
	}
	return false, ctx.Err()
}

// dir reads ranges from a directory of files named by prefix.
type dir struct {
	path string
}

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
	if _, err := f.ReadDir(1); err != nil && !errors.Is(err, io.EOF) {
		return dir{}, fmt.Errorf("breached: directory of ranges is not readable: %w", err)
	}
	return dir{path: path}, nil
}

// Breached reads the range file of the password's prefix. A prefix with
// no file has no breached password. A slow disk does not hold the caller
// past ctx: the read goes on alone and its answer is dropped.
func (d dir) Breached(ctx context.Context, password string) (bool, error) {
	prefix, suffix := split(password)
	type answer struct {
		found bool
		err   error
	}
	done := make(chan answer, 1)
	go func() {
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
	var f *os.File
	var err error
	for _, name := range []string{prefix + ".txt", prefix} {
		if f, err = os.Open(filepath.Join(d.path, name)); !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("breached: opening range file: %w", pathless(err))
	}
	defer f.Close()
	return findSuffix(ctx, f, suffix)
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
		return api{}, fmt.Errorf("breached: range API URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return api{}, errors.New("breached: range API URL must be http(s)://host[/path], without user, query or fragment")
	}
	if client == nil {
		client = &http.Client{
			// A redirect could send the prefix where the operator did not
			// choose: an answer that is not 200 is a failure instead.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	return api{base: strings.TrimSuffix(u.String(), "/"), client: client}, nil
}

// Breached asks the API for the range of the password's prefix.
func (a api) Breached(ctx context.Context, password string) (bool, error) {
	prefix, suffix := split(password)
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
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return false, fmt.Errorf("breached: range API answered %s", resp.Status)
	}
	return findSuffix(ctx, resp.Body, suffix)
}
