package web_test

import (
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/web"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// post sends body with a content type and returns the response and its
// body.
func post(t *testing.T, c *http.Client, url, contentType, body string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return do(t, c, req)
}

// get sends a GET with the header's name and value pairs, as post does.
func get(t *testing.T, c *http.Client, url string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return do(t, c, req)
}

func do(t *testing.T, c *http.Client, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

const (
	jsonType = "application/json"
	formType = "application/x-www-form-urlencoded"
)

type webConfig = web.Config

func mustPrefixes(t *testing.T, s string) []netip.Prefix {
	t.Helper()
	p, err := web.ParseTrustedProxies(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
