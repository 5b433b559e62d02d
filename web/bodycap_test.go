package web_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// TestBodyCap: a body past the cap is refused whether its length is
// declared or it comes in chunks, and one within it is read, declared or
// not.
func TestBodyCap(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	url := env.Start(t) + "/api/v1/login"
	huge := `{"email":"cap@example.com","password":"` + strings.Repeat("a", 70<<10) + `"}`
	small := `{"email":"cap@example.com","password":"not-the-password"}`
	// Valid JSON past the cap, the cap alone refuses it.
	padded := small + strings.Repeat(" ", 70<<10)
	for _, c := range []struct {
		name    string
		body    string
		chunked bool
		want    int
	}{
		{"declared, past the cap", huge, false, http.StatusBadRequest},
		{"chunked, past the cap", huge, true, http.StatusBadRequest},
		{"declared, valid JSON past the cap", padded, false, http.StatusBadRequest},
		{"chunked, valid JSON past the cap", padded, true, http.StatusBadRequest},
		{"declared, within it", small, false, http.StatusUnauthorized},
		{"chunked, within it", small, true, http.StatusUnauthorized},
	} {
		var body io.Reader = strings.NewReader(c.body)
		if c.chunked {
			body = io.MultiReader(body) // no length: sent in chunks
		}
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, body)
		if err != nil {
			t.Fatal(err)
		}
		if c.chunked {
			req.ContentLength = -1
		}
		req.Header.Set("Content-Type", jsonType)
		resp, text := do(t, http.DefaultClient, req)
		if resp.StatusCode != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, resp.StatusCode, text, c.want)
		}
	}
}
