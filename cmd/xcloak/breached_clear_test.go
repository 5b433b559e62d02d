package main

import (
	"strings"
	"testing"
)

// TestServeWarnsOfBreachedLookupsInClear: serve warns at start when
// XCLOAK_BREACHED_PASSWORDS is a range API in plain http on a host other
// than this machine, whose answers anyone on the path can write; not for
// https, nor for http on loopback.
func TestServeWarnsOfBreachedLookupsInClear(t *testing.T) {
	t.Parallel()
	const warning = "XCLOAK_BREACHED_PASSWORDS is a range API in plain http to a host that is not this machine"
	vars := storeSettings(t)
	for _, tt := range []struct {
		name, url string
		warned    bool
	}{
		// serve does not ask the API anything to start.
		{"remote http", "http://ranges.example.com/pwned", true},
		{"remote https", "https://api.pwnedpasswords.com", false},
		{"http on loopback", "http://127.0.0.1:8089", false},
	} {
		vars["XCLOAK_BREACHED_PASSWORDS"] = tt.url
		srv := startServe(t, vars)
		if err := srv.stop(); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		logs := srv.stderr.String()
		if got := strings.Contains(logs, warning); got != tt.warned {
			t.Errorf("%s: warned %v, want %v; log:\n%s", tt.name, got, tt.warned, logs)
		}
		if tt.warned && !strings.Contains(logs, `"level":"WARN"`) {
			t.Errorf("%s: the warning is not at level WARN:\n%s", tt.name, logs)
		}
	}
}
