package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/attack"
	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/breached"
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
		BreachedTimeout: breached.DefaultTimeout,
		Auth:            auth.DefaultConfig(),
		Attack:          attack.DefaultConfig(),
	}
	with := func(change func(*config)) config {
		c := defaults
		// A copy of a config shares its limits' map.
		c.Auth.Limits = maps.Clone(defaults.Auth.Limits)
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
				"XCLOAK_ADDR":               ":9000",
				"XCLOAK_REDIS_URL":          "redis://cache:6380/2",
				"XCLOAK_DATABASE_URL":       "postgres://app@db/xcloak",
				"XCLOAK_SECRET":             "4f9a1c0e7b2d8f3a6c5e9b1d0a7f2c8e",
				"XCLOAK_TRUSTED_PROXIES":    "10.0.0.0/8, 192.168.1.7",
				"XCLOAK_FORWARDED_HEADER":   "Forwarded",
				"XCLOAK_INSECURE_COOKIES":   "true",
				"XCLOAK_KEY_PREFIX":         "login:",
				"XCLOAK_HASH_CONCURRENCY":   "3",
				"XCLOAK_LIMIT_LOGIN_IP":     "100/1m",
				"XCLOAK_LOCKOUT_DURATION":   "1m",
				"XCLOAK_SESSION_TTL":        "1h",
				"XCLOAK_BREACHED_TIMEOUT":   "2s",
				"XCLOAK_BREACHED_PASSWORDS": "https://ranges.example/pwned/",
			},
			want: with(func(c *config) {
				c.Addr, c.RedisURL, c.DatabaseURL = ":9000", "redis://cache:6380/2", "postgres://app@db/xcloak"
				c.Auth.Secret = []byte("4f9a1c0e7b2d8f3a6c5e9b1d0a7f2c8e")
				c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.1.7/32")}
				c.ForwardedHeader = web.HeaderForwarded
				c.InsecureCookies = true
				c.KeyPrefix = "login:"
				c.HashConcurrency = 3
				c.Auth.Limits[auth.RuleLoginIP] = ratelimit.Limit{Count: 100, Window: time.Minute}
				c.Auth.Lockout.Duration = time.Minute
				c.Auth.SessionTTL = time.Hour
				c.BreachedTimeout = 2 * time.Second
				c.BreachedPasswords = "https://ranges.example/pwned/"
			}),
		},
		{
			name: "flags override environment",
			env:  map[string]string{"XCLOAK_ADDR": ":9000", "XCLOAK_LIMIT_RESET_ACCOUNT": "5/1h", "XCLOAK_INSECURE_COOKIES": "true"},
			args: []string{"--addr", "127.0.0.1:0", "-limit-reset-account=1/1m", "--insecure-cookies=false"},
			want: with(func(c *config) {
				c.Addr = "127.0.0.1:0"
				c.Auth.Limits[auth.RuleResetAccount] = ratelimit.Limit{Count: 1, Window: time.Minute}
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
			name: "session idle time",
			env:  map[string]string{"XCLOAK_SESSION_IDLE": "2h"},
			want: with(func(c *config) { c.Auth.SessionIdle = 2 * time.Hour }),
		},
		{
			name: "session idle time off",
			args: []string{"--session-idle=off"},
			want: with(func(c *config) { c.Auth.SessionIdle = 0 }),
		},
		{
			name: "audit log off",
			env:  map[string]string{"XCLOAK_AUDIT_LOG": "off"},
			want: with(func(c *config) { c.Auth.AuditLog = false }),
		},
		{
			name: "passkeys' relying party",
			env:  map[string]string{"XCLOAK_WEBAUTHN_RP_ID": "Example.com", "XCLOAK_WEBAUTHN_ORIGINS": "https://login.example.com/, https://app.example.com:8443"},
			want: with(func(c *config) {
				c.Auth.WebAuthn = auth.WebAuthnConfig{RPID: "example.com", Origins: []string{"https://login.example.com", "https://app.example.com:8443"}}
			}),
		},
		{
			name: "translators' prefixes",
			env:  map[string]string{"XCLOAK_NAT64_PREFIXES": "2001:db8:64::/96, 2001:db8:122::/48"},
			want: with(func(c *config) {
				c.NAT64Prefixes = []netip.Prefix{netip.MustParsePrefix("2001:db8:64::/96"), netip.MustParsePrefix("2001:db8:122::/48")}
			}),
		},
		{
			name: "public URL",
			env:  map[string]string{"XCLOAK_PUBLIC_URL": "https://login.example.com/"},
			want: with(func(c *config) {
				c.Auth.PublicURL, _ = parsePublicURL("https://login.example.com/")
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

// TestLimitSettingsFromRules: every rule of auth's table with a limit of
// its own has its setting, named after the rule, with the table's default
// and help, which sets that rule's limit; README's row of it is exactly
// the one the table gives; and no other setting is a limit.
func TestLimitSettingsFromRules(t *testing.T) {
	rows := readmeConfigRows(t)
	byEnv := make(map[string]setting)
	for _, s := range settings {
		byEnv[s.env] = s
	}
	want := make(map[string]bool)
	for _, r := range auth.Rules() {
		env := limitEnv(r.Name)
		s, ok := byEnv[env]
		if !r.OwnLimit() {
			if ok {
				t.Errorf("rule %s has no limit of its own but has a setting %s", r.Name, env)
			}
			continue
		}
		want[env] = true
		if !ok {
			t.Errorf("rule %s has no setting %s", r.Name, env)
			continue
		}
		if s.flag != limitFlag(r.Name) || s.def != formatLimit(r.Default) || s.usage != r.Usage+" as `COUNT/WINDOW`" || s.scope != forServe {
			t.Errorf("setting of rule %s = %s --%s default %s %q, want --%s default %s %q", r.Name,
				s.env, s.flag, s.def, s.usage, limitFlag(r.Name), formatLimit(r.Default), r.Usage+" as `COUNT/WINDOW`")
		}
		row := "| `" + env + "` | `--" + limitFlag(r.Name) + "` | `" + formatLimit(r.Default) + "` | " + r.Doc + " |"
		if rows[env] != row {
			t.Errorf("README's row of %s is\n%s\nwant (from auth's table of rules)\n%s", env, rows[env], row)
		}
		c := config{Auth: auth.DefaultConfig()}
		if err := s.set(&c, "7/3m"); err != nil {
			t.Errorf("setting %s to 7/3m: %v", env, err)
		} else if got, want := c.Auth.Limits[r.Name], (ratelimit.Limit{Count: 7, Window: 3 * time.Minute}); got != want {
			t.Errorf("setting %s to 7/3m: limit of %s = %v, want %v", env, r.Name, got, want)
		}
	}
	for _, s := range settings {
		if strings.HasPrefix(s.env, "XCLOAK_LIMIT_") && !want[s.env] {
			t.Errorf("setting %s is no rule's limit", s.env)
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
	vars := environ(map[string]string{"XCLOAK_SECRET": "hunter2-hunter2-hunter2-hunter2-hunter2"})
	if err := run(t.Context(), []string{"xcloak", "serve", "--help"}, vars, strings.NewReader(""), &stdout, &stderr); err != nil {
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

// TestSecretStrength: secrets made as README says always pass; short ones
// and visible patterns are refused, and the error never shows the secret.
func TestSecretStrength(t *testing.T) {
	for range 2000 {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		for _, secret := range []string{hex.EncodeToString(b), base64.StdEncoding.EncodeToString(b)} {
			if err := checkSecret(secret); err != nil {
				t.Fatalf("checkSecret refused a random secret like openssl rand makes: %v", err)
			}
		}
	}
	for _, secret := range []string{testSecret, "4f9a1c0e7b2d8f3a6c5e9b1d0a7f2c8e", "correct horse battery staple, and then some"} {
		if err := checkSecret(secret); err != nil {
			t.Errorf("checkSecret refused %q: %v", secret, err)
		}
	}
	for secret, want := range map[string]string{
		"short":                                    "5 bytes long, want at least 32",
		strings.Repeat("a", 40):                    "1 different bytes, want at least 10",
		strings.Repeat("abc", 14):                  "3 different bytes, want at least 10",
		strings.Repeat("0123456789abcdef", 2):      "a repeating pattern",
		strings.Repeat("password12", 4):            "has only 9 different bytes",
		strings.Repeat("q1w2e3r4t5", 4):            "a repeating pattern",
		"abcdefghijklmnopqrstuvwxyz0123456789":     "a repeating pattern",
		"zyxwvutsrqponmlkjihgfedcba9876543210ZYXW": "a repeating pattern",
	} {
		err := checkSecret(secret)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("checkSecret(%q) = %v, want an error saying %q", secret, err, want)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("checkSecret's error quotes the secret: %v", err)
		}
	}
}

// TestSettingsFromFiles: XCLOAK_SECRET_FILE, XCLOAK_DATABASE_URL_FILE and
// XCLOAK_SMTP_URL_FILE read those settings from files, one trailing
// newline trimmed; a variable and its _FILE together, or a file that
// cannot be read, are errors that name the variable and never the content.
func TestSettingsFromFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	const secret = "4f9a1c0e7b2d8f3a6c5e9b1d0a7f2c8e-from-a-file"
	const dbURL = "postgres://app:hunter2@db/xcloak"
	const smtpURL = "smtp://xcloak:hunter2@mail.example.com:587?from=xcloak@example.com"
	const redisURL = "rediss://xcloak:hunter2@cache.example.com:6380/2"
	load := func(vars map[string]string) (config, error) {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		return loadConfig(fs, nil, env(vars), new(bytes.Buffer), new(bytes.Buffer), forServe)
	}

	cfg, err := load(map[string]string{
		"XCLOAK_SECRET_FILE":       write("secret", secret+"\n"),
		"XCLOAK_DATABASE_URL_FILE": write("db", dbURL+"\r\n"),
		"XCLOAK_SMTP_URL_FILE":     write("smtp", smtpURL),
		"XCLOAK_REDIS_URL_FILE":    write("redis", redisURL+"\n"),
	})
	if err != nil {
		t.Fatalf("load from files: %v", err)
	}
	if string(cfg.Auth.Secret) != secret || cfg.DatabaseURL != dbURL || cfg.SMTPURL != smtpURL || cfg.RedisURL != redisURL {
		t.Errorf("from files: secret %q, database %q, smtp %q, redis %q; want the files' first lines",
			cfg.Auth.Secret, cfg.DatabaseURL, cfg.SMTPURL, cfg.RedisURL)
	}
	// The same secret from a variable filled from that file (a Kubernetes
	// secret made with --from-file) is the same key: every replica must
	// sign device cookies alike, whichever way it reads the secret.
	cfg, err = load(map[string]string{"XCLOAK_SECRET": secret + "\n", "XCLOAK_DATABASE_URL": dbURL + "\r\n"})
	if err != nil || string(cfg.Auth.Secret) != secret || cfg.DatabaseURL != dbURL {
		t.Errorf("from variables ending in a line break: secret %q, database %q, %v; want the files' values",
			cfg.Auth.Secret, cfg.DatabaseURL, err)
	}
	// The user commands take the stores' files too.
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	cfg, err = loadConfig(fs, nil, env(map[string]string{"XCLOAK_REDIS_URL_FILE": write("redis2", redisURL)}),
		new(bytes.Buffer), new(bytes.Buffer), forUser)
	if err != nil || cfg.RedisURL != redisURL {
		t.Errorf("user command: redis %q, %v; want the file's", cfg.RedisURL, err)
	}

	for _, tt := range []struct {
		name    string
		vars    map[string]string
		wantErr string
	}{
		{"variable and file", map[string]string{"XCLOAK_SECRET": secret, "XCLOAK_SECRET_FILE": write("s2", secret)},
			"XCLOAK_SECRET and XCLOAK_SECRET_FILE are both set"},
		{"missing file", map[string]string{"XCLOAK_DATABASE_URL_FILE": filepath.Join(dir, "nothing")},
			"XCLOAK_DATABASE_URL_FILE: cannot read"},
		{"directory", map[string]string{"XCLOAK_SMTP_URL_FILE": dir},
			"XCLOAK_SMTP_URL_FILE: cannot read"},
		{"empty file", map[string]string{"XCLOAK_SECRET_FILE": write("empty", "\n")},
			"XCLOAK_SECRET_FILE: the file is empty"},
		{"weak secret in a file", map[string]string{"XCLOAK_SECRET_FILE": write("weak", "hunter2hunter2hunter2hunter2hunter2\n")},
			"XCLOAK_SECRET_FILE: has only 7 different bytes"},
		{"bad URL in a file", map[string]string{"XCLOAK_SMTP_URL_FILE": write("badsmtp", "smtp://u:hunter2@mail.example.com:587\n")},
			"XCLOAK_SMTP_URL_FILE: smtpmail: invalid SMTP URL"},
		{"Redis URL and file", map[string]string{"XCLOAK_REDIS_URL": redisURL, "XCLOAK_REDIS_URL_FILE": write("r2", redisURL)},
			"XCLOAK_REDIS_URL and XCLOAK_REDIS_URL_FILE are both set"},
		{"bad Redis URL in a file", map[string]string{"XCLOAK_REDIS_URL_FILE": write("badredis", "redis://u:hunter2/x@cache:6379\n")},
			"XCLOAK_REDIS_URL_FILE: not a valid URL"},
		{"file too big", map[string]string{"XCLOAK_SECRET_FILE": write("big", strings.Repeat("hunter2", 10000))},
			"XCLOAK_SECRET_FILE: larger than 64 KiB"},
		{"device file", map[string]string{"XCLOAK_SECRET_FILE": "/dev/zero"},
			"XCLOAK_SECRET_FILE: larger than 64 KiB"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := load(tt.vars)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), secret) {
				t.Errorf("error shows a file's content: %v", err)
			}
		})
	}
}

// TestURLErrorsHideThePassword: a Redis URL that does not parse is
// refused without quoting any piece of it, since a password holding a '/'
// or '?' ends up in net/url's complaint about the port.
func TestURLErrorsHideThePassword(t *testing.T) {
	for _, raw := range []string{
		"redis://user:Sup3r/SecretPw@host:6379",
		"redis://:SecretPw?x@host:6379",
		"redis://:Secret%zzPw@host:6379",
		// A '?' or '/' not percent-encoded after a password's first part
		// that reads as a port (none, or digits) puts the rest in the
		// query or the path, which go-redis quotes.
		"redis://:?SecretPw@host:6379/0",
		"redis://user:1234?SecretPw@host:6379/0",
		"redis://:1234/SecretPw@host:6379/0",
		"redis://:1234?a=1&SecretPw@host:6379/0",
		// go-redis quotes them decoded: a '+' as a space, a
		// percent-encoded byte as itself.
		"redis://:1234?Secret+Pw@host:6379/0",
		"redis://:?Xk+Secret+Vb8wN@host:6379/0",
		"redis://:1234/ab%40SecretPw@host:6379/0",
		"redis://user:1234?Secret%3DPw=x@host:6379/0",
		// A '#' would make the rest a fragment, which nothing reads: the
		// URL would name localhost:1234, without the password.
		"redis://:1234#SecretPw@host:6379/0",
	} {
		err := checkRedisURL(raw)
		if err == nil {
			t.Errorf("%s: accepted", raw)
			continue
		}
		if strings.Contains(err.Error(), "Secret") || strings.Contains(err.Error(), "Sup3r") {
			t.Errorf("%s: the error quotes the password: %v", raw, err)
		}
	}
}

// TestPublicURLErrorsHideTheUserinfo: a public URL refused for its
// scheme, its host or a missing "://" is refused without quoting it, since
// a user and password in it would be printed as they are.
func TestPublicURLErrorsHideTheUserinfo(t *testing.T) {
	for _, raw := range []string{
		"ftp://Alic3Usr:S3cr3tPw@login.example.com",
		"https://Alic3Usr:S3cr3tPw@/",
		"http://Alic3Usr:S3cr3tPw@:80",
		"https//Alic3Usr:S3cr3tPw@login.example.com",
		"https://Alic3Usr:S3cr3tPw@login.example.com:99999",
		"https://login.example.com/?Alic3Usr:S3cr3tPw",
	} {
		_, err := parsePublicURL(raw)
		if err == nil {
			t.Errorf("%s: accepted", raw)
			continue
		}
		for _, piece := range []string{"Alic3Usr", "S3cr3tPw"} {
			if strings.Contains(err.Error(), piece) {
				t.Errorf("%s: the error quotes %q: %v", raw, piece, err)
			}
		}
	}
}

// TestPublicURLWithAPathIsRefused: XCloak serves its pages, forms,
// cookies and passkey ceremonies at the root of its host, so a public URL
// with a path would mail links that land on a page whose forms post
// outside it. Such a URL is refused at start, naming the setting.
func TestPublicURLWithAPathIsRefused(t *testing.T) {
	for _, raw := range []string{
		"https://login.example.com/xcloak",
		"https://login.example.com/xcloak/",
		"https://login.example.com//",
		"https://login.example.com/%2F",
	} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		_, err := loadConfig(fs, nil, env(map[string]string{"XCLOAK_PUBLIC_URL": raw}), new(bytes.Buffer), new(bytes.Buffer), forServe)
		if err == nil || !strings.HasPrefix(err.Error(), "XCLOAK_PUBLIC_URL: ") || !strings.Contains(err.Error(), "path") {
			t.Errorf("%s: err = %v, want one naming XCLOAK_PUBLIC_URL and its path", raw, err)
		}
	}
	for _, raw := range []string{"https://login.example.com", "https://login.example.com/"} {
		if _, err := parsePublicURL(raw); err != nil {
			t.Errorf("%s: %v", raw, err)
		}
	}
}

// TestPublicURLHostPastASCIIIsRefused: a public URL's host is compared,
// lowered, with the hosts rd names, which are ASCII; lowered by Unicode's
// rules "İ" would be "i". An internationalised name is given in its xn--
// form, as XCLOAK_PROTECTED_HOSTS takes it.
func TestPublicURLHostPastASCIIIsRefused(t *testing.T) {
	for _, raw := range []string{"https://wİki.example.com", "https://\u212aey.example.com/", "https://bücher.example"} {
		if _, err := parsePublicURL(raw); err == nil || !strings.Contains(err.Error(), "xn--") {
			t.Errorf("%s: err = %v, want one asking for the xn-- form", raw, err)
		}
	}
	if _, err := parsePublicURL("https://xn--bcher-kva.example"); err != nil {
		t.Errorf("an xn-- name: %v", err)
	}
}

// TestDatabaseURLErrorsHideTheUserinfo: a database URL that does not parse
// is refused without any piece of its user name or password, even where
// an '@' that is not percent-encoded makes pgx mask only the password's
// first part; the keyword/value form alike.
func TestDatabaseURLErrorsHideTheUserinfo(t *testing.T) {
	for _, raw := range []string{
		"postgres://Alic3Usr:T0p@S3cr3tPw@db.example.com:5432x/xcloak",
		"postgres://Alic3Usr:T0p@S3c%zzr3tPw@db.example.com/xcloak",
		"postgres://Alic3Usr:T0p@S3cr3t Pw@db.example.com/xcloak",
		"postgresql://Alic3Usr:T0p@S3cr3tPw@localhost:5432/xcloak?sslmode=bogus",
		"postgres://Alic3Usr:T0p@S3cr3t:Pw@db.example.com/xcloak",
		"postgres://Alic3%zzUsr:S3cr3tPw@db.example.com/xcloak",
		"postgres://Alic3Usr:S3cr3t/Pw@db.example.com/xcloak",
		"host=db.example.com user=Alic3Usr password=T0p@S3cr3tPw port=bad dbname=xcloak",
		// The pool's own parameters, which pgx alone takes as settings.
		"postgres://Alic3Usr:T0p@S3cr3tPw@db.example.com/xcloak?pool_max_conns=many",
		"postgres://Alic3Usr:T0p@S3cr3tPw@db.example.com/xcloak?pool_max_conn_lifetime=forever",
	} {
		err := checkDatabaseURL(raw)
		if err == nil {
			t.Errorf("%s: accepted", raw)
			continue
		}
		for _, piece := range []string{"Alic3", "Usr", "T0p", "S3c", "r3t", "Pw"} {
			if strings.Contains(err.Error(), piece) {
				t.Errorf("%s: the error quotes %q of the user or password: %v", raw, piece, err)
			}
		}
	}
	// What is wrong is still said.
	if err := checkDatabaseURL("postgres://u:p@db.example.com:5432x/xcloak"); err == nil || !strings.Contains(err.Error(), "invalid port") {
		t.Errorf("bad port: %v, want an error saying so", err)
	}
	if err := checkDatabaseURL("postgres://u:p@db.example.com/xcloak?pool_max_conns=0"); err == nil || !strings.Contains(err.Error(), "pool_max_conns") {
		t.Errorf("pool of no connection: %v, want an error naming pool_max_conns", err)
	}
}

// TestDatabaseURLRefusesHealthCheckPeriodOfNoTime: pgxpool takes a
// pool_health_check_period of zero or less and its pool's first health
// check then panics (time.NewTicker), in a goroutine of its own, ending
// the process in a stack trace as soon as the pool is made. It is refused
// with the other settings, naming the parameter.
func TestDatabaseURLRefusesHealthCheckPeriodOfNoTime(t *testing.T) {
	for _, period := range []string{"0s", "-1s"} {
		err := checkDatabaseURL("postgres://u:S3cr3tPw@db.example.com/xcloak?pool_health_check_period=" + period)
		if err == nil || !strings.Contains(err.Error(), "pool_health_check_period") || strings.Contains(err.Error(), "S3cr3tPw") {
			t.Errorf("pool_health_check_period=%s: %v, want an error naming it", period, err)
		}
	}
	if err := checkDatabaseURL("postgres://u:p@db.example.com/xcloak?pool_health_check_period=30s"); err != nil {
		t.Errorf("pool_health_check_period=30s: %v", err)
	}
}

// TestAuditLogIsOnOrOff: XCLOAK_AUDIT_LOG takes on or off and nothing else,
// so that a typo does not silently stop the stream a SIEM follows.
func TestAuditLogIsOnOrOff(t *testing.T) {
	for _, v := range []string{"true", "no", "On"} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		_, err := loadConfig(fs, nil, env(map[string]string{"XCLOAK_AUDIT_LOG": v}), new(bytes.Buffer), new(bytes.Buffer), forServe)
		if err == nil || !strings.Contains(err.Error(), "XCLOAK_AUDIT_LOG") {
			t.Errorf("XCLOAK_AUDIT_LOG=%s: err = %v, want one naming the setting", v, err)
		}
	}
}

// TestUnknownSettingsWarned: a variable that starts with XCLOAK_ but is no
// setting (a typo such as XCLOAK_LOCKOUT_THRESHHOLD, a _FILE of a setting
// that takes none) is warned of once at start, by name and never by
// value; a setting of another command, the _FILE of one that takes it,
// and the tests' own XCLOAK_TEST_* and XCLOAK_E2E_* are not.
func TestUnknownSettingsWarned(t *testing.T) {
	t.Parallel()
	vars := storeSettings(t)
	const value = "hunter2-never-printed"
	env := append(environ(vars),
		"XCLOAK_LOCKOUT_THRESHHOLD="+value,
		"XCLOAK_LOCKOUT_THRESHHOLD="+value, // listed twice: warned once
		"XCLOAK_ADDR_FILE="+value,
		"XCLOAK_WEBHOOK_SECRET_FILE=", // a setting of serve, not of migrate
		"XCLOAK_ATTACK_QUIET=1h",
		"XCLOAK_TEST_REDIS_URL="+value,
		"XCLOAK_E2E_SCREENSHOTS="+value,
		"XCLOAK_E2E_ANYTHING="+value,
		"xcloak_lower="+value,
		"OTHER_XCLOAK_THING="+value,
	)
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), []string{"xcloak", "migrate"}, env, strings.NewReader(""), &stdout, &stderr); err != nil {
		t.Fatalf("migrate: %v\nstderr:\n%s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), value) {
		t.Errorf("stderr shows a value:\n%s", stderr.String())
	}
	var named []string
	for l := range strings.Lines(stderr.String()) {
		var line map[string]any
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatalf("stderr line is not JSON: %v\n%s", err, l)
		}
		if line["level"] != "WARN" || !strings.Contains(line["msg"].(string), "unknown") {
			t.Errorf("stderr line %s: want a warning of an unknown variable", l)
		}
		named = append(named, fmt.Sprint(line["variable"]))
	}
	if got, want := strings.Join(named, " "), "XCLOAK_ADDR_FILE XCLOAK_LOCKOUT_THRESHHOLD"; got != want {
		t.Errorf("warned of %q, want %q\nstderr:\n%s", got, want, stderr.String())
	}
}

// TestMFARememberZero: XCLOAK_MFA_REMEMBER=0 (or 0s) remembers no browser
// (auth offers no "remember this browser" then); a negative duration, or
// one past 90 days (7200h typed for 720h), is refused.
func TestMFARememberZero(t *testing.T) {
	load := func(v string) (config, error) {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		return loadConfig(fs, nil, env(map[string]string{"XCLOAK_MFA_REMEMBER": v}), new(bytes.Buffer), new(bytes.Buffer), forServe)
	}
	for _, v := range []string{"0", "0s"} {
		if cfg, err := load(v); err != nil || cfg.Auth.MFA.RememberFor != 0 {
			t.Errorf("XCLOAK_MFA_REMEMBER=%s: %v, %v; want 0", v, cfg.Auth.MFA.RememberFor, err)
		}
	}
	if cfg, err := load("12h"); err != nil || cfg.Auth.MFA.RememberFor != 12*time.Hour {
		t.Errorf("XCLOAK_MFA_REMEMBER=12h: %v, %v", cfg.Auth.MFA.RememberFor, err)
	}
	if cfg, err := load("2160h"); err != nil || cfg.Auth.MFA.RememberFor != auth.MaxMFARememberFor {
		t.Errorf("XCLOAK_MFA_REMEMBER=2160h: %v, %v", cfg.Auth.MFA.RememberFor, err)
	}
	for _, v := range []string{"-1h", "soon", "2161h", "7200h", "2562047h"} {
		if _, err := load(v); err == nil || !strings.Contains(err.Error(), "XCLOAK_MFA_REMEMBER") {
			t.Errorf("XCLOAK_MFA_REMEMBER=%s: %v, want an error naming it", v, err)
		}
	}
}

// TestServeWarnsOfRiskySettings: settings that start but undo a
// protection are said at start: a trusted proxy that is nearly every
// address, and cookies without Secure behind an https public URL. (A
// trusted proxy written with host bits, a typo for an address that would
// trust its whole network, is refused: TestParseTrustedProxies.)
func TestServeWarnsOfRiskySettings(t *testing.T) {
	vars := storeSettings(t)
	vars["XCLOAK_TRUSTED_PROXIES"] = "10.0.0.0/8, 0.0.0.0/0, ::/0, fc00::/7, 2001:db8:64::/64"
	vars["XCLOAK_NAT64_PREFIXES"] = "2001:db8:64::/96"
	vars["XCLOAK_INSECURE_COOKIES"] = "true"
	vars["XCLOAK_PUBLIC_URL"] = "https://login.example.com"
	srv := startServe(t, vars)
	if err := srv.stop(); err != nil {
		t.Fatal(err)
	}
	logs := srv.stderr.String()
	for _, want := range []string{
		"XCLOAK_TRUSTED_PROXIES trusts 0.0.0.0/0, nearly every address",
		"XCLOAK_TRUSTED_PROXIES trusts ::/0, nearly every address",
		"XCLOAK_INSECURE_COOKIES is true with an https XCLOAK_PUBLIC_URL",
		// The /64 the translator's /96 was made of.
		"XCLOAK_TRUSTED_PROXIES trusts 2001:db8:64::/64, which holds the IPv4 clients 0.0.0.0/0 through the translator prefix 2001:db8:64::/96",
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("no warning %q in\n%s", want, logs)
		}
	}
	for _, ok := range []string{"trusts 10.0.0.0/8", "trusts fc00::/7"} {
		if strings.Contains(logs, ok) {
			t.Errorf("a warning for a private range (%s) in\n%s", ok, logs)
		}
	}
}

// TestServeWarnsOfDefaultPublicURLOnEveryInterface: without
// XCLOAK_PUBLIC_URL, the links mailed start with the listen address, made
// browsable: for a server listening on every interface, as the image
// does, http://localhost:PORT, which reaches no user's browser but on
// this machine. serve says so at start; not when it listens on loopback
// alone (users on this machine) or when the URL is set.
func TestServeWarnsOfDefaultPublicURLOnEveryInterface(t *testing.T) {
	const warning = "XCLOAK_PUBLIC_URL is not set"
	for _, tt := range []struct {
		name      string
		addr, url string
		warned    bool
	}{
		{"every interface", "0.0.0.0:0", "", true},
		{"every interface, URL set", "0.0.0.0:0", "https://login.example.com", false},
		{"loopback", "127.0.0.1:0", "", false},
	} {
		vars := storeSettings(t)
		vars["XCLOAK_PUBLIC_URL"] = tt.url
		srv := startServe(t, vars, "--addr", tt.addr)
		if err := srv.stop(); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		logs := srv.stderr.String()
		if got := strings.Contains(logs, warning); got != tt.warned {
			t.Errorf("%s: warned %v, want %v; log:\n%s", tt.name, got, tt.warned, logs)
		}
	}
}

// TestServeWarnsOfPlainHTTPPublicURL: a public URL of plain http on a
// host others reach (a forgotten "s" behind a TLS proxy, where sign-ins
// still work) mails every link's token in clear; it is warned of at
// start, and one on this machine alone is not.
func TestServeWarnsOfPlainHTTPPublicURL(t *testing.T) {
	const warning = "is plain http on a host others reach"
	for _, tt := range []struct {
		url    string
		warned bool
	}{
		{"http://login.example.com", true},
		{"https://login.example.com", false},
		{"http://localhost:8080", false},
		{"http://127.0.0.1:8080", false},
	} {
		vars := storeSettings(t)
		vars["XCLOAK_PUBLIC_URL"] = tt.url
		if strings.HasPrefix(tt.url, "http:") {
			vars["XCLOAK_INSECURE_COOKIES"] = "true"
		}
		srv := startServe(t, vars)
		if err := srv.stop(); err != nil {
			t.Fatalf("%s: %v", tt.url, err)
		}
		logs := srv.stderr.String()
		if got := strings.Contains(logs, warning); got != tt.warned {
			t.Errorf("%s: warned %v, want %v; log:\n%s", tt.url, got, tt.warned, logs)
		}
	}
}

// TestServeWarnsOfRedisWithoutCertificateCheck: skip_verify in a
// rediss:// URL turns off the check of Redis' certificate, which leaves
// every limit and lockout to whoever is on the path; it is warned of at
// start, and a URL without it is not.
func TestServeWarnsOfRedisWithoutCertificateCheck(t *testing.T) {
	vars := storeSettings(t)
	plain := vars["XCLOAK_REDIS_URL"]
	warnsAtStart(t, vars, "XCLOAK_REDIS_URL", "XCLOAK_REDIS_URL sets skip_verify", []startWarning{
		{"skip_verify", "rediss://127.0.0.1:1/0?skip_verify=true", true},
		{"plain", plain, false},
	})
}

// TestServeWarnsOfPatternedMFAKey: XCLOAK_MFA_KEY takes any 64 hex
// digits, and a placeholder such as 64 zeros seals the authenticator-app
// secrets with a key anyone can try. It is not refused, since the factors
// sealed with it would then be lost with no way to seal them anew, but
// warned of at start, by the rule XCLOAK_SECRET must follow.
func TestServeWarnsOfPatternedMFAKey(t *testing.T) {
	vars := storeSettings(t)
	warnsAtStart(t, vars, "XCLOAK_MFA_KEY", "XCLOAK_MFA_KEY is not a random key", []startWarning{
		{"zeros", strings.Repeat("0", 64), true},
		{"a pattern", strings.Repeat("0123456789abcdef", 4), true},
		{"random", hex.EncodeToString([]byte("\x9b\x1f\x8e\x03\x55\xc2\x7a\x91\x4d\xe6\x20\xb8\x6f\x13\xd4\x4a\x08\xf1\x5c\x97\x2e\xbb\x64\x39\xa0\x7d\xc5\x12\x8a\xe3\x46\x0f")), false},
	})
}

// TestServeWarnsOfMFAKeyThatIsTheSecret: XCLOAK_MFA_KEY written as the
// same 64 hex digits as XCLOAK_SECRET seals the authenticator-app secrets
// with a key that whoever holds the secret holds, and that rotating a
// leaked secret leaves in force. Warned of, as a patterned key is, for
// the same reason it is not refused.
func TestServeWarnsOfMFAKeyThatIsTheSecret(t *testing.T) {
	const secret = "9b1f8e0355c27a914de620b86f13d44a08f15c972ebb6439a07dc5128ae3460f"
	vars := storeSettings(t)
	vars["XCLOAK_SECRET"] = secret
	warnsAtStart(t, vars, "XCLOAK_MFA_KEY", "XCLOAK_MFA_KEY is XCLOAK_SECRET", []startWarning{
		{"the secret's digits", secret, true},
		{"in capitals", strings.ToUpper(secret), true},
		{"a key of its own", mfaKeyHex, false},
	})
}

// TestURLPortsOutOfRangeAreRefused: a port no connection can use, in a
// URL setting, is a typo refused at start, naming the setting, as the
// database's and the passkey origins' are. Accepted, it fails later and
// quietly: a Redis at such a port leaves serve in degraded mode for good,
// a breach corpus there checks no password being set, every webhook is
// given up on, and every link mailed points nowhere.
func TestURLPortsOutOfRangeAreRefused(t *testing.T) {
	for _, tt := range []struct{ env, value string }{
		{"XCLOAK_REDIS_URL", "redis://:SecretPw@cache:99999/0"},
		{"XCLOAK_REDIS_URL", "redis://cache:0/0"},
		{"XCLOAK_REDIS_URL", "redis://a:6379,b:65536"},
		{"XCLOAK_PUBLIC_URL", "https://login.example.com:99999/"},
		{"XCLOAK_PUBLIC_URL", "https://login.example.com:0/"},
		{"XCLOAK_BREACHED_PASSWORDS", "https://ranges.example:70000/"},
		{"XCLOAK_WEBHOOK_URL", "https://hooks.example:99999/x?token=abc"},
	} {
		t.Run(tt.env+"="+tt.value, func(t *testing.T) {
			vars := map[string]string{tt.env: tt.value}
			if tt.env == "XCLOAK_WEBHOOK_URL" {
				vars["XCLOAK_WEBHOOK_SECRET"] = webhookSecret
			}
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			_, err := loadConfig(fs, nil, env(vars), new(bytes.Buffer), new(bytes.Buffer), forServe)
			if err == nil || !strings.HasPrefix(err.Error(), tt.env+": ") || !strings.Contains(err.Error(), "port") {
				t.Fatalf("err = %v, want one naming %s and the port", err, tt.env)
			}
			if strings.Contains(err.Error(), "SecretPw") || strings.Contains(err.Error(), "token") {
				t.Errorf("err %q quotes a secret", err)
			}
		})
	}
	// The ports at either end of the range are ports.
	for _, tt := range []struct{ env, value string }{
		{"XCLOAK_REDIS_URL", "redis://cache:65535/0"},
		{"XCLOAK_PUBLIC_URL", "https://login.example.com:1/"},
		{"XCLOAK_BREACHED_PASSWORDS", "https://ranges.example:65535/"},
	} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		if _, err := loadConfig(fs, nil, env(map[string]string{tt.env: tt.value}), new(bytes.Buffer), new(bytes.Buffer), forServe); err != nil {
			t.Errorf("%s=%s: %v", tt.env, tt.value, err)
		}
	}
}

// TestLockoutThresholdIsBounded: a threshold no guesser reaches turns
// lockouts off without a word; beyond a limit's largest count it is a
// typo, refused at start as the limits' counts are, not a lockout that
// never comes.
func TestLockoutThresholdIsBounded(t *testing.T) {
	for _, v := range []string{"100001", "1000000000", "9223372036854775807"} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		_, err := loadConfig(fs, nil, env(map[string]string{"XCLOAK_LOCKOUT_THRESHOLD": v}), new(bytes.Buffer), new(bytes.Buffer), forServe)
		if err == nil || !strings.HasPrefix(err.Error(), "XCLOAK_LOCKOUT_THRESHOLD: ") {
			t.Errorf("%s: err = %v, want one naming XCLOAK_LOCKOUT_THRESHOLD", v, err)
		}
	}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	cfg, err := loadConfig(fs, nil, env(map[string]string{"XCLOAK_LOCKOUT_THRESHOLD": strconv.Itoa(ratelimit.MaxCount)}), new(bytes.Buffer), new(bytes.Buffer), forServe)
	if err != nil || cfg.Auth.Lockout.Threshold != ratelimit.MaxCount {
		t.Errorf("the largest threshold: %v, %v", cfg.Auth.Lockout.Threshold, err)
	}
}

// TestSecretFlagsWarned: a setting that may hold a secret, given as a
// flag, is in every user's ps for as long as the process runs; the start
// says so, names its _FILE, and never shows the value. The same value in
// the environment is not warned of.
func TestSecretFlagsWarned(t *testing.T) {
	const key = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	load := func(args []string, vars map[string]string) string {
		var stderr bytes.Buffer
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		if _, err := loadConfig(fs, args, env(vars), new(bytes.Buffer), &stderr, forServe); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return stderr.String()
	}
	out := load([]string{"--mfa-key", key, "--database-url", "postgres://app:hunter2@db/xcloak"}, nil)
	for _, want := range []string{"XCLOAK_MFA_KEY_FILE", "XCLOAK_DATABASE_URL_FILE", "ps"} {
		if !strings.Contains(out, want) {
			t.Errorf("flags: stderr does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, key) || strings.Contains(out, "hunter2") {
		t.Errorf("stderr shows a value:\n%s", out)
	}
	if out := load(nil, map[string]string{"XCLOAK_MFA_KEY": key}); out != "" {
		t.Errorf("from the environment: stderr %q, want nothing", out)
	}
	if out := load([]string{"--key-prefix", "app:"}, nil); out != "" {
		t.Errorf("a setting that holds no secret: stderr %q, want nothing", out)
	}
}
