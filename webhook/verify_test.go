package webhook_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/webhook"
)

func TestVerify(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	body := []byte(`{"id":"x"}`)
	at := time.Unix(1_800_000_000, 0)
	good := webhook.Sign(secret, at, body)
	for _, tc := range []struct {
		name   string
		header string
		body   string
		now    time.Time
		ok     bool
	}{
		{"as signed", good, string(body), at, true},
		{"5 minutes later", good, string(body), at.Add(5 * time.Minute), true},
		{"5 minutes early", good, string(body), at.Add(-5 * time.Minute), true},
		{"past the window", good, string(body), at.Add(5*time.Minute + time.Second), false},
		{"before the window", good, string(body), at.Add(-5*time.Minute - time.Second), false},
		{"another body", good, `{"id":"y"}`, at, false},
		{"another secret", webhook.Sign([]byte("another secret, 32 bytes or more!"), at, body), string(body), at, false},
		{"time changed", strings.Replace(good, "t=1800000000", "t=1800000001", 1), string(body), at, false},
		{"a second v1 that matches", "t=1800000000,v1=00," + strings.SplitN(good, ",", 2)[1], string(body), at, true},
		{"spaces after commas", strings.Replace(good, ",", ", ", 1), string(body), at, true},
		{"no v1", "t=1800000000", string(body), at, false},
		{"no t", strings.SplitN(good, ",", 2)[1], string(body), at, false},
		{"empty", "", string(body), at, false},
		{"v1 not hex", "t=1800000000,v1=zz", string(body), at, false},
		{"t not a number", strings.Replace(good, "t=1800000000", "t=18e8", 1), string(body), at, false},
		{"t huge", strings.Replace(good, "t=1800000000", "t=9223372036854775807", 1), string(body), at, false},
		{"t negative", strings.Replace(good, "t=1800000000", "t=-1800000000", 1), string(body), at, false},
		{"t beyond int64", strings.Replace(good, "t=1800000000", "t=99999999999999999999", 1), string(body), at, false},
		{"a second t", good + ",t=1800000001", string(body), at, false},
		{"header injected", good + "\r\nX-Other: 1", string(body), at, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := webhook.Verify(secret, tc.header, []byte(tc.body), tc.now)
			if (err == nil) != tc.ok {
				t.Errorf("Verify(%q) = %v, want ok %v", tc.header, err, tc.ok)
			}
		})
	}
}

// TestVerifyRefusesAMissingSecret: a receiver whose secret did not load
// (an unset variable, an empty file) must not take what anyone can sign
// with the empty key.
func TestVerifyRefusesAMissingSecret(t *testing.T) {
	body := []byte(`{"id":"x"}`)
	at := time.Unix(1_800_000_000, 0)
	for _, secret := range [][]byte{nil, {}, []byte("short")} {
		header := webhook.Sign(secret, at, body)
		if err := webhook.Verify(secret, header, body, at); err == nil {
			t.Errorf("Verify with the secret %q took a header signed with it", secret)
		}
	}
}

// TestReadmeShowsVerify holds the README's receiver code to verify.go's:
// what a receiver copies is what the tests run.
func TestReadmeShowsVerify(t *testing.T) {
	src, err := os.ReadFile("verify.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Index(string(src), "import (")
	if start < 0 {
		t.Fatal("verify.go has no import block")
	}
	code := string(src[start:])
	if !strings.Contains(string(readme), code) {
		t.Errorf("README.md does not show verify.go from its imports on, as it is:\n%s", code)
	}
}

// TestReadmeListsEveryType: the README's table of webhooks names every
// type sent, so that a receiver learns of each.
func TestReadmeListsEveryType(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Webhooks\n")
	if !ok {
		t.Fatal("README.md has no Webhooks section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var rows []string
	for line := range strings.Lines(section) {
		if strings.HasPrefix(line, "| `") {
			first, _, _ := strings.Cut(strings.TrimPrefix(line, "| "), " |")
			rows = append(rows, first)
		}
	}
	for _, typ := range webhook.Types() {
		found := false
		for _, r := range rows {
			found = found || strings.Contains(r, "`"+typ+"`")
		}
		if !found {
			t.Errorf("README.md's table of webhooks does not list %s", typ)
		}
	}
}
