package main

import (
	"bufio"
	"bytes"
	"flag"
	"net/netip"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/ratelimit"
	"github.com/xcloak/xcloak/web"
)

func TestLoadConfig(t *testing.T) {
	defaults := config{
		Addr:            "127.0.0.1:8080",
		RedisURL:        "redis://127.0.0.1:6379/0",
		DatabaseURL:     "postgres://postgres@127.0.0.1:5432/xcloak?sslmode=disable",
		ForwardedHeader: web.HeaderXForwardedFor,
		MetricsAddr:     "127.0.0.1:9090",
		KeyPrefix:       "xcloak:",
		Auth:            auth.DefaultConfig(),
	}
	with := func(change func(*config)) config {
		c := defaults
		change(&c)
		return c
	}
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want config
	}{
		{name: "defaults", want: defaults},
		{
			name: "environment overrides defaults",
			env: map[string]string{
				"XCLOAK_ADDR":             ":9000",
				"XCLOAK_REDIS_URL":        "redis://cache:6380/2",
				"XCLOAK_DATABASE_URL":     "postgres://app@db/xcloak",
				"XCLOAK_SECRET":           "0123456789abcdef0123456789abcdef",
				"XCLOAK_TRUSTED_PROXIES":  "10.0.0.0/8, 192.168.1.7",
				"XCLOAK_FORWARDED_HEADER": "Forwarded",
				"XCLOAK_INSECURE_COOKIES": "true",
				"XCLOAK_KEY_PREFIX":       "login:",
				"XCLOAK_HASH_CONCURRENCY": "3",
				"XCLOAK_LIMIT_LOGIN_IP":   "100/1m",
				"XCLOAK_LOCKOUT_DURATION": "1m",
				"XCLOAK_SESSION_TTL":      "1h",
			},
			want: with(func(c *config) {
				c.Addr, c.RedisURL, c.DatabaseURL = ":9000", "redis://cache:6380/2", "postgres://app@db/xcloak"
				c.Auth.Secret = []byte("0123456789abcdef0123456789abcdef")
				c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.1.7/32")}
				c.ForwardedHeader = web.HeaderForwarded
				c.InsecureCookies = true
				c.KeyPrefix = "login:"
				c.HashConcurrency = 3
				c.Auth.Limits.LoginIP = ratelimit.Limit{Count: 100, Window: time.Minute}
				c.Auth.Lockout.Duration = time.Minute
				c.Auth.SessionTTL = time.Hour
			}),
		},
		{
			name: "flags override environment",
			env:  map[string]string{"XCLOAK_ADDR": ":9000", "XCLOAK_LIMIT_RESET_ACCOUNT": "5/1h", "XCLOAK_INSECURE_COOKIES": "true"},
			args: []string{"--addr", "127.0.0.1:0", "-limit-reset-account=1/1m", "--insecure-cookies=false"},
			want: with(func(c *config) {
				c.Addr = "127.0.0.1:0"
				c.Auth.Limits.ResetAccount = ratelimit.Limit{Count: 1, Window: time.Minute}
			}),
		},
		{
			name: "a bool flag alone means true",
			args: []string{"--insecure-cookies"},
			want: with(func(c *config) { c.InsecureCookies = true }),
		},
		{
			name: "an empty value means the default",
			env:  map[string]string{"XCLOAK_KEY_PREFIX": "login:"},
			args: []string{"--key-prefix=", "--smtp-url", ""},
			want: defaults,
		},
		{
			name: "public URL",
			env:  map[string]string{"XCLOAK_PUBLIC_URL": "https://login.example.com/xcloak/"},
			want: with(func(c *config) {
				c.Auth.PublicURL, _ = parsePublicURL("https://login.example.com/xcloak/")
			}),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			var stdout, stderr bytes.Buffer
			got, err := loadConfig(fs, tt.args, env(tt.env), &stdout, &stderr, forServe)
			if err != nil {
				t.Fatalf("err = %v, want nil", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("config =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

func TestLoadConfigOnlyReadsTheCommandsSettings(t *testing.T) {
	// migrate takes only the database; a bad limit in the environment,
	// meant for serve, is not its business.
	getenv := env(map[string]string{"XCLOAK_LIMIT_LOGIN_IP": "banana", "XCLOAK_ADDR": ":9000"})
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	got, err := loadConfig(fs, nil, getenv, new(bytes.Buffer), new(bytes.Buffer), forMigrate)
	if err != nil {
		t.Fatalf("err = %v, want nil", err)
	}
	if got.Addr != "127.0.0.1:8080" {
		t.Errorf("Addr = %q, want the default", got.Addr)
	}
	if fs.Lookup("limit-login-ip") != nil {
		t.Errorf("migrate has a --limit-login-ip flag; want only its own settings")
	}
}

func TestFormatDuration(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want string
	}{
		{10 * time.Minute, "10m"},
		{time.Hour, "1h"},
		{24 * time.Hour, "24h"},
		{90 * time.Minute, "1h30m"},
		{90 * time.Second, "1m30s"},
		{1500 * time.Millisecond, "1.5s"},
	}
	for _, tt := range tests {
		got := formatDuration(tt.in)
		if got != tt.want {
			t.Errorf("formatDuration(%v) = %q, want %q", tt.in, got, tt.want)
		}
		if back, err := time.ParseDuration(got); err != nil || back != tt.in {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", got, back, err, tt.in)
		}
	}
}

// TestReadmeListsEverySetting keeps README's Configuration table and the
// settings table in step: every setting has a row with its flag and its
// default, and every XCLOAK_ variable in the table (but the tests' own) is
// a setting.
func TestReadmeListsEverySetting(t *testing.T) {
	rows := readmeConfigRows(t)
	known := make(map[string]bool)
	for _, s := range settings {
		known[s.env] = true
		row, ok := rows[s.env]
		if !ok {
			t.Errorf("README's Configuration table has no row for %s", s.env)
			continue
		}
		for _, want := range []string{"`--" + s.flag + "`", "`" + s.shownDefault() + "`"} {
			if !strings.Contains(row, want) {
				t.Errorf("README row of %s lacks %s:\n%s", s.env, want, row)
			}
		}
	}
	for name := range rows {
		if !known[name] && !strings.HasPrefix(name, "XCLOAK_TEST_") {
			t.Errorf("README's Configuration table lists %s, which is no setting", name)
		}
	}
}

// readmeConfigRows returns the rows of the table under README's
// "## Configuration" heading, by the variable in their first cell.
func readmeConfigRows(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows := make(map[string]string)
	inSection := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			inSection = line == "## Configuration"
			continue
		}
		if !inSection || !strings.HasPrefix(line, "| `XCLOAK_") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(line, "| `"), "`")
		rows[name] = line
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatal("README.md has no Configuration table")
	}
	return rows
}

func TestServeHelpListsEverySetting(t *testing.T) {
	var stdout, stderr bytes.Buffer
	// Values in the environment must not show up as defaults.
	getenv := env(map[string]string{"XCLOAK_SECRET": "hunter2-hunter2-hunter2-hunter2-hunter2"})
	if err := run(t.Context(), []string{"xcloak", "serve", "--help"}, getenv, strings.NewReader(""), &stdout, &stderr); err != nil {
		t.Fatalf("err = %v, want nil", err)
	}
	help := stdout.String()
	for _, s := range settings {
		for _, want := range []string{"  -" + s.flag, "env " + s.env + ", default " + s.shownDefault() + ")"} {
			if !strings.Contains(help, want) {
				t.Errorf("serve --help lacks %q", want)
			}
		}
	}
	if !strings.Contains(help, "-dev") {
		t.Errorf("serve --help lacks -dev")
	}
	if strings.Contains(help, "hunter2") {
		t.Errorf("serve --help shows the secret from the environment:\n%s", help)
	}
}
