package main

import "testing"

// TestServeWarnsOfBreachedLookupsInClear: serve warns at start when
// XCLOAK_BREACHED_PASSWORDS is a range API in plain http on a host other
// than this machine, whose answers anyone on the path can write; not for
// https, nor for http on loopback.
func TestServeWarnsOfBreachedLookupsInClear(t *testing.T) {
	t.Parallel()
	const warning = "XCLOAK_BREACHED_PASSWORDS is a range API in plain http to a host that is not this machine"
	warnsAtStart(t, storeSettings(t), "XCLOAK_BREACHED_PASSWORDS", warning, []startWarning{
		// serve does not ask the API anything to start.
		{"remote http", "http://ranges.example.com/pwned", true},
		{"remote https", "https://api.pwnedpasswords.com", false},
		{"http on loopback", "http://127.0.0.1:8089", false},
	})
}
