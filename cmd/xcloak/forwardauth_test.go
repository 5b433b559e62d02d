package main

import (
	"strings"
	"testing"
)

// TestServeRefusesBadForwardAuthSettings: a protected host pattern or a
// cookie domain that cannot work stops serve before it connects to
// anything, with a message that names the setting.
func TestServeRefusesBadForwardAuthSettings(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		env     map[string]string
		wantErr string
	}{
		{"a wildcard over a top-level domain", map[string]string{"XCLOAK_PROTECTED_HOSTS": "app.example.com, *.com"},
			`XCLOAK_PROTECTED_HOSTS: protected host "*.com": a wildcard must cover a domain of at least two labels`},
		{"a lone star", map[string]string{"XCLOAK_PROTECTED_HOSTS": "*"},
			`XCLOAK_PROTECTED_HOSTS: protected host "*"`},
		{"a scheme", map[string]string{"XCLOAK_PROTECTED_HOSTS": "https://app.example.com"},
			`XCLOAK_PROTECTED_HOSTS: protected host "https://app.example.com": give the host alone, without a scheme`},
		{"a path", map[string]string{"XCLOAK_PROTECTED_HOSTS": "app.example.com/admin"},
			`XCLOAK_PROTECTED_HOSTS: protected host "app.example.com/admin": give the host alone, without a path`},
		{"a space inside", map[string]string{"XCLOAK_PROTECTED_HOSTS": "app example.com"},
			`XCLOAK_PROTECTED_HOSTS: protected host "app example.com": not a DNS name`},
		{"a role that is not admin", map[string]string{"XCLOAK_PROTECTED_HOSTS": "app.example.com=staff"},
			`XCLOAK_PROTECTED_HOSTS: protected host "app.example.com=staff": "staff" is not a role`},
		{"a cookie domain of one label", map[string]string{"XCLOAK_COOKIE_DOMAIN": "com"},
			`XCLOAK_COOKIE_DOMAIN: "com" is a single label`},
		{"a cookie domain without XCloak", map[string]string{"XCLOAK_COOKIE_DOMAIN": "example.net", "XCLOAK_PUBLIC_URL": "https://login.example.com"},
			"XCLOAK_COOKIE_DOMAIN example.net does not contain XCloak's own host login.example.com"},
		{"a protected host outside the cookie domain", map[string]string{"XCLOAK_COOKIE_DOMAIN": "example.com",
			"XCLOAK_PUBLIC_URL": "https://login.example.com", "XCLOAK_PROTECTED_HOSTS": "app.example.com, wiki.example.org"},
			"XCLOAK_PROTECTED_HOSTS wiki.example.org is outside XCLOAK_COOKIE_DOMAIN example.com"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			vars := map[string]string{
				"XCLOAK_SECRET":       testSecret,
				"XCLOAK_MAIL_LOG":     "true",
				"XCLOAK_ADDR":         "127.0.0.1:0",
				"XCLOAK_REDIS_URL":    "redis://127.0.0.1:1",
				"XCLOAK_DATABASE_URL": "postgres://u:hunter2@127.0.0.1:1/none",
			}
			for k, v := range tt.env {
				vars[k] = v
			}
			_, stderr, err := xcloak(t, vars, "", "serve")
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
			}
			if !strings.Contains(stderr, tt.wantErr) {
				t.Errorf("stderr = %q, want the error", stderr)
			}
		})
	}
}
