package main

import (
	"strings"
	"testing"

	"github.com/xcloak/xcloak/internal/testenv"
)

// TestServeWarnsOfMailInClear: serve warns at start when XCLOAK_SMTP_URL
// says tls=none to a host other than this machine, whose reset links
// would cross a network in clear; not when the relay is on loopback.
func TestServeWarnsOfMailInClear(t *testing.T) {
	t.Parallel()
	const warning = "XCLOAK_SMTP_URL has tls=none to a host that is not this machine"
	vars := storeSettings(t)
	delete(vars, "XCLOAK_MAIL_LOG")
	warnsAtStart(t, vars, "XCLOAK_SMTP_URL", warning, []startWarning{
		// serve does not connect to the mail server to start.
		{"remote relay", "smtp://mail.example.com:25?from=xcloak@example.com&tls=none", true},
		{"relay on loopback", testenv.SMTP(t).URL(), false},
	})
}

// startWarning is a value of a setting and whether serve warns of it at
// start.
type startWarning struct {
	name, value string
	warned      bool
}

// warnsAtStart starts serve with vars and each case's value of setting,
// and checks that its log holds warning, at level WARN, exactly where the
// case says.
func warnsAtStart(t *testing.T, vars map[string]string, setting, warning string, cases []startWarning) {
	t.Helper()
	for _, tt := range cases {
		vars[setting] = tt.value
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
