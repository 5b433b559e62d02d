package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/webhook"
)

const webhookSecret = "9c1e5a7f3b0d2e8c4a6f1b9d7e3c5a0f-hooks"

// mfaKeyHex is an XCLOAK_MFA_KEY.
const mfaKeyHex = "3b7e1f9a5c0d2e4b6a8f1c3e5d7b9a0c2e4f6b8d1a3c5e7f9b0d2a4c6e8f1b3d"

func loadWebhookConfig(vars map[string]string) (config, error) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	return loadConfig(fs, nil, env(vars), new(bytes.Buffer), new(bytes.Buffer), forServe)
}

func TestWebhookSettings(t *testing.T) {
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "secret")
	if err := os.WriteFile(secretFile, []byte(webhookSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadWebhookConfig(map[string]string{
		"XCLOAK_WEBHOOK_URL":         "https://hooks.example.com/xcloak?token=abc, http://alerts.internal:8080/in",
		"XCLOAK_WEBHOOK_SECRET_FILE": secretFile,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Webhook.URLs) != 2 || cfg.Webhook.URLs[0].String() != "https://hooks.example.com/xcloak?token=abc" ||
		cfg.Webhook.URLs[1].String() != "http://alerts.internal:8080/in" || len(cfg.Webhook.Secrets) != 1 || string(cfg.Webhook.Secrets[0]) != webhookSecret {
		t.Errorf("webhook config %+v", cfg.Webhook)
	}
	// A secret per receiver, in the URLs' order.
	const otherSecret = "4d2b8e6a0c1f3e5d7b9a2c4e6f8a1b3d-alerts"
	cfg, err = loadWebhookConfig(map[string]string{
		"XCLOAK_WEBHOOK_URL":    "https://hooks.example.com/xcloak,http://alerts.internal:8080/in",
		"XCLOAK_WEBHOOK_SECRET": webhookSecret + ", " + otherSecret,
	})
	if err != nil || len(cfg.Webhook.Secrets) != 2 || string(cfg.Webhook.Secrets[0]) != webhookSecret || string(cfg.Webhook.Secrets[1]) != otherSecret {
		t.Errorf("a secret per URL: %+v, %v", cfg.Webhook, err)
	}
	if cfg, err := loadWebhookConfig(nil); err != nil || len(cfg.Webhook.URLs) != 0 || cfg.Webhook.Secrets != nil {
		t.Errorf("unset: %+v, %v; want no webhooks", cfg.Webhook, err)
	}

	for _, tt := range []struct {
		name    string
		vars    map[string]string
		wantErr string
	}{
		{"no scheme", map[string]string{"XCLOAK_WEBHOOK_URL": "hooks.example.com/x", "XCLOAK_WEBHOOK_SECRET": webhookSecret},
			"XCLOAK_WEBHOOK_URL: URL 1 of the list: webhook: a URL must start with https:// or http://"},
		{"no host", map[string]string{"XCLOAK_WEBHOOK_URL": "https:///x", "XCLOAK_WEBHOOK_SECRET": webhookSecret},
			"XCLOAK_WEBHOOK_URL: URL 1 of the list: webhook: a URL must name a host"},
		{"user info", map[string]string{"XCLOAK_WEBHOOK_URL": "https://a.example/x,https://u:hunter2@b.example/x", "XCLOAK_WEBHOOK_SECRET": webhookSecret},
			"XCLOAK_WEBHOOK_URL: URL 2 of the list: webhook: a URL must not carry a user name or password"},
		{"empty item", map[string]string{"XCLOAK_WEBHOOK_URL": "https://a.example/x,,", "XCLOAK_WEBHOOK_SECRET": webhookSecret},
			"XCLOAK_WEBHOOK_URL: URL 2 of the list is empty"},
		{"twice", map[string]string{"XCLOAK_WEBHOOK_URL": "https://a.example/x,https://a.example/x", "XCLOAK_WEBHOOK_SECRET": webhookSecret},
			"XCLOAK_WEBHOOK_URL: URL 2 of the list is listed before"},
		{"twice, the host in capitals", map[string]string{"XCLOAK_WEBHOOK_URL": "https://a.example/x,https://A.Example/x", "XCLOAK_WEBHOOK_SECRET": webhookSecret},
			"XCLOAK_WEBHOOK_URL: URL 2 of the list is listed before"},
		{"twice, with the default port", map[string]string{"XCLOAK_WEBHOOK_URL": "https://a.example/x,https://a.example:443/x", "XCLOAK_WEBHOOK_SECRET": webhookSecret},
			"XCLOAK_WEBHOOK_URL: URL 2 of the list is listed before"},
		// Separated by a space, two URLs would be one, to a path that
		// does not exist.
		{"separated by spaces", map[string]string{"XCLOAK_WEBHOOK_URL": "https://a.example/x https://b.example/y", "XCLOAK_WEBHOOK_SECRET": webhookSecret},
			"XCLOAK_WEBHOOK_URL: URL 1 of the list has a space in it: separate URLs with commas"},
		{"ftp", map[string]string{"XCLOAK_WEBHOOK_URL": "ftp://a.example/x", "XCLOAK_WEBHOOK_SECRET": webhookSecret},
			"XCLOAK_WEBHOOK_URL: URL 1 of the list: webhook: a URL must start with"},
		{"URL without secret", map[string]string{"XCLOAK_WEBHOOK_URL": "https://a.example/x"},
			"XCLOAK_WEBHOOK_URL is set without XCLOAK_WEBHOOK_SECRET"},
		{"secret without URL", map[string]string{"XCLOAK_WEBHOOK_SECRET": webhookSecret},
			"XCLOAK_WEBHOOK_SECRET is set without XCLOAK_WEBHOOK_URL"},
		{"secret and file", map[string]string{"XCLOAK_WEBHOOK_URL": "https://a.example/x", "XCLOAK_WEBHOOK_SECRET": webhookSecret,
			"XCLOAK_WEBHOOK_SECRET_FILE": secretFile}, "XCLOAK_WEBHOOK_SECRET and XCLOAK_WEBHOOK_SECRET_FILE are both set"},
		{"short secret", map[string]string{"XCLOAK_WEBHOOK_URL": "https://a.example/x", "XCLOAK_WEBHOOK_SECRET": "4f9a1c0e7b2d"},
			"XCLOAK_WEBHOOK_SECRET: 12 bytes long, want at least 32"},
		{"two secrets for three URLs", map[string]string{"XCLOAK_WEBHOOK_URL": "https://a.example/x,https://b.example/x,https://c.example/x",
			"XCLOAK_WEBHOOK_SECRET": webhookSecret + "," + webhookSecret + "2"}, "XCLOAK_WEBHOOK_SECRET lists 2 secrets for the 3 URLs"},
		{"one secret twice", map[string]string{"XCLOAK_WEBHOOK_URL": "https://a.example/x,https://b.example/x",
			"XCLOAK_WEBHOOK_SECRET": webhookSecret + "," + webhookSecret}, "XCLOAK_WEBHOOK_SECRET: secret 2 of the list is secret 1"},
		{"a short secret in the list", map[string]string{"XCLOAK_WEBHOOK_URL": "https://a.example/x,https://b.example/x",
			"XCLOAK_WEBHOOK_SECRET": webhookSecret + ",4f9a1c0e7b2d"}, "XCLOAK_WEBHOOK_SECRET: secret 2 of the list: 12 bytes long"},
		{"the service's secret among them", map[string]string{"XCLOAK_WEBHOOK_URL": "https://a.example/x,https://b.example/x",
			"XCLOAK_WEBHOOK_SECRET": mfaKeyHex + "," + webhookSecret, "XCLOAK_SECRET": webhookSecret}, "XCLOAK_WEBHOOK_SECRET is XCLOAK_SECRET"},
		{"weak secret", map[string]string{"XCLOAK_WEBHOOK_URL": "https://a.example/x", "XCLOAK_WEBHOOK_SECRET": strings.Repeat("ab", 20)},
			"XCLOAK_WEBHOOK_SECRET: has only 2 different bytes"},
		// Every receiver holds the webhook secret: as XCLOAK_SECRET it
		// would let each forge the service's device cookies.
		{"the service's secret", map[string]string{"XCLOAK_WEBHOOK_URL": "https://a.example/x", "XCLOAK_WEBHOOK_SECRET": webhookSecret,
			"XCLOAK_SECRET": webhookSecret}, "XCLOAK_WEBHOOK_SECRET is XCLOAK_SECRET"},
		{"the service's secret, both from one file", map[string]string{"XCLOAK_WEBHOOK_URL": "https://a.example/x",
			"XCLOAK_WEBHOOK_SECRET_FILE": secretFile, "XCLOAK_SECRET_FILE": secretFile}, "XCLOAK_WEBHOOK_SECRET is XCLOAK_SECRET"},
		// As XCLOAK_MFA_KEY it would let each, with a copy of the
		// database, read every authenticator-app secret.
		{"the authenticator key's digits", map[string]string{"XCLOAK_WEBHOOK_URL": "https://a.example/x", "XCLOAK_WEBHOOK_SECRET": mfaKeyHex,
			"XCLOAK_MFA_KEY": mfaKeyHex}, "XCLOAK_WEBHOOK_SECRET is XCLOAK_MFA_KEY"},
		{"the authenticator key's digits in capitals", map[string]string{"XCLOAK_WEBHOOK_URL": "https://a.example/x",
			"XCLOAK_WEBHOOK_SECRET": strings.ToUpper(mfaKeyHex), "XCLOAK_MFA_KEY": mfaKeyHex}, "XCLOAK_WEBHOOK_SECRET is XCLOAK_MFA_KEY"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadWebhookConfig(tt.vars)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), webhookSecret) || strings.Contains(strings.ToLower(err.Error()), mfaKeyHex) {
				t.Errorf("err %q quotes a secret", err)
			}
		})
	}
}

// TestServeDevRefusesTheDevSecretForWebhooks: with --dev, the secret is
// the development one, and a webhook secret equal to it is refused too,
// before anything connects.
func TestServeDevRefusesTheDevSecretForWebhooks(t *testing.T) {
	t.Chdir(t.TempDir())
	const devSecret = "5e0b3a9c7d1f2e4a6b8c0d9e1f3a5b7c9d0e2f4a6b8c1d3e5f7a9b0c2d4e6f8a"
	if err := os.MkdirAll(filepath.Dir(devSecretPath), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(devSecretPath, []byte(devSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{
		"XCLOAK_REDIS_URL":      "redis://127.0.0.1:1",
		"XCLOAK_DATABASE_URL":   "postgres://u:hunter2@127.0.0.1:1/none",
		"XCLOAK_WEBHOOK_URL":    "https://hooks.example.com/xcloak",
		"XCLOAK_WEBHOOK_SECRET": devSecret,
	}
	_, stderr, err := xcloak(t, vars, "", "serve", "--dev")
	const want = "XCLOAK_WEBHOOK_SECRET is XCLOAK_SECRET"
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(stderr, want) {
		t.Fatalf("serve --dev: %v, stderr %q; want %q", err, stderr, want)
	}
	if strings.Contains(stderr, devSecret) {
		t.Errorf("stderr %q quotes the secret", stderr)
	}
}

// TestServeSendsSignedWebhooks: through serve, a real lockout is POSTed,
// signed, to the receiver; and the same event, by "xcloak user unlock",
// as account.unlocked by cli, sent before the command returns, as are
// user.created of "xcloak user add", user.promoted of "xcloak user
// promote" and apikey.created and apikey.revoked of "xcloak apikey add"
// and "revoke", which never carry the key.
func TestServeSendsSignedWebhooks(t *testing.T) {
	t.Parallel()
	got := make(chan webhook.Event, 16)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Error(err)
		}
		if err := webhook.Verify([]byte(webhookSecret), r.Header.Get(webhook.SignatureHeader), body, time.Now()); err != nil {
			t.Errorf("a webhook's signature: %v", err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var ev webhook.Event
		if err := json.Unmarshal(body, &ev); err != nil {
			t.Errorf("body %s: %v", body, err)
		}
		got <- ev
	}))
	t.Cleanup(receiver.Close)

	vars := storeSettings(t)
	vars["XCLOAK_WEBHOOK_URL"] = receiver.URL + "/xcloak"
	vars["XCLOAK_WEBHOOK_SECRET"] = webhookSecret
	vars["XCLOAK_LOCKOUT_THRESHOLD"] = "3"
	const email, password = "ann@example.com", "correct horse battery"
	// sent takes the webhook a command sent before it returned.
	sent := func(cmd string) webhook.Event {
		t.Helper()
		select {
		case ev := <-got:
			return ev
		default:
			t.Fatalf("%s returned before its webhook was delivered", cmd)
			return webhook.Event{}
		}
	}
	addUser(t, vars, email, password+"\n")
	if ev := sent("user add"); ev.Type != webhook.TypeUserCreated || ev.Data["account"] != email || ev.Data["by"] != "cli" ||
		ev.Data["role"] != "member" {
		t.Errorf("webhook of user add %+v, want user.created of a member by cli", ev)
	}
	srv := startServe(t, vars)
	for i := range 3 {
		signIn(t, srv.base, email, fmt.Sprint("wrong password ", i))
	}
	var ev webhook.Event
	select {
	case ev = <-got:
	case <-time.After(time.Minute): // a bound on a hang, not on speed
		t.Fatal("no webhook for the lockout")
	}
	if ev.Type != webhook.TypeLockoutStarted || ev.Data["account"] != email || ev.Data["level"] != "1" || ev.Data["until"] == "" ||
		ev.Data["source"] != "127.0.0.1" || ev.ID == "" {
		t.Errorf("first webhook %+v, want ann's lockout.started", ev)
	}

	if _, stderr, err := xcloak(t, vars, "", "user", "unlock", "--email", email); err != nil {
		t.Fatalf("user unlock: %v\n%s", err, stderr)
	}
	if ev = sent("user unlock"); ev.Type != webhook.TypeAccountUnlocked || ev.Data["account"] != email || ev.Data["by"] != "cli" {
		t.Errorf("webhook of user unlock %+v, want account.unlocked by cli", ev)
	}
	if _, stderr, err := xcloak(t, vars, "", "user", "promote", "--email", email); err != nil {
		t.Fatalf("user promote: %v\n%s", err, stderr)
	}
	if ev = sent("user promote"); ev.Type != webhook.TypeUserPromoted || ev.Data["account"] != email || ev.Data["by"] != "cli" {
		t.Errorf("webhook of user promote %+v, want user.promoted by cli", ev)
	}
	key, stderr, err := xcloak(t, vars, "", "apikey", "add", "--name", "shop")
	if err != nil {
		t.Fatalf("apikey add: %v\n%s", err, stderr)
	}
	created := sent("apikey add")
	if _, stderr, err := xcloak(t, vars, "", "apikey", "revoke", "--name", "shop"); err != nil {
		t.Fatalf("apikey revoke: %v\n%s", err, stderr)
	}
	revoked := sent("apikey revoke")
	for _, ev := range []webhook.Event{created, revoked} {
		if ev.Data["app"] != "shop" || ev.Data["by"] != "cli" || ev.Data["key_id"] == "" || ev.Data["key_id"] != created.Data["key_id"] ||
			len(ev.Data) != 3 || strings.Contains(fmt.Sprint(ev), key[4:12]) {
			t.Errorf("webhook %+v, want shop's key's id by cli, and never the key", ev)
		}
	}
	if created.Type != webhook.TypeAPIKeyCreated || revoked.Type != webhook.TypeAPIKeyRevoked {
		t.Errorf("webhooks of apikey add and revoke: %s and %s", created.Type, revoked.Type)
	}
	if err := srv.stop(); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-got:
		t.Errorf("a webhook more: %+v", ev)
	default:
	}
}

// TestEachReceiverItsOwnSecret: with a secret per URL, a command's webhook
// reaches each receiver signed with that receiver's secret alone.
func TestEachReceiverItsOwnSecret(t *testing.T) {
	t.Parallel()
	secrets := []string{webhookSecret, "4d2b8e6a0c1f3e5d7b9a2c4e6f8a1b3d-alerts"}
	var urls []string
	got := make(chan int, 4)
	for i, secret := range secrets {
		receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			sig := r.Header.Get(webhook.SignatureHeader)
			if err := webhook.Verify([]byte(secret), sig, body, time.Now()); err != nil {
				t.Errorf("receiver %d, its own secret: %v", i, err)
			}
			if webhook.Verify([]byte(secrets[1-i]), sig, body, time.Now()) == nil {
				t.Errorf("receiver %d's webhook verifies with the other receiver's secret", i)
			}
			got <- i
		}))
		t.Cleanup(receiver.Close)
		urls = append(urls, receiver.URL+"/xcloak")
	}
	vars := storeSettings(t)
	vars["XCLOAK_WEBHOOK_URL"] = strings.Join(urls, ",")
	vars["XCLOAK_WEBHOOK_SECRET"] = strings.Join(secrets, ",")
	addUser(t, vars, "bo@example.com", "correct horse battery\n")
	seen := map[int]bool{}
	for len(seen) < 2 {
		select {
		case i := <-got:
			seen[i] = true
		default:
			t.Fatalf("user add returned with webhooks delivered to %v of the 2 receivers", seen)
		}
	}
}

// TestSameReceiverTwiceIsRefused: two URLs that reach the same receiver
// at the same place, however they are written, would send it every
// event twice; the second is refused, as one in other capitals is.
func TestSameReceiverTwiceIsRefused(t *testing.T) {
	for _, urls := range []string{
		"https://hooks.example,https://hooks.example/",
		"https://hooks.example?k=1,https://hooks.example/?k=1",
		"https://hooks.example:443/in,https://hooks.example:0443/in",
		"http://hooks.example:8080/in,http://hooks.example:08080/in",
	} {
		_, err := loadWebhookConfig(map[string]string{"XCLOAK_WEBHOOK_URL": urls, "XCLOAK_WEBHOOK_SECRET": webhookSecret})
		if err == nil || !strings.Contains(err.Error(), "XCLOAK_WEBHOOK_URL: URL 2 of the list is listed before") {
			t.Errorf("%s: err = %v, want URL 2 refused as listed before", urls, err)
		}
	}
	// Other paths, ports or queries are other places.
	for _, urls := range []string{
		"https://hooks.example/in,https://hooks.example/in/",
		"https://hooks.example/in,https://hooks.example:8443/in",
		"https://hooks.example/?k=1,https://hooks.example/?k=2",
	} {
		if _, err := loadWebhookConfig(map[string]string{"XCLOAK_WEBHOOK_URL": urls, "XCLOAK_WEBHOOK_SECRET": webhookSecret}); err != nil {
			t.Errorf("%s: %v", urls, err)
		}
	}
}
