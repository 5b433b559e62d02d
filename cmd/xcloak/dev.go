package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/xcloak/xcloak/auth"
)

const (
	// devSecretPath keeps the development secret, relative to the working
	// directory, beside the local Redis and Postgres data, so that device
	// cookies stay valid across restarts.
	devSecretPath = ".data/dev-secret"
	// demoAdminEmail is the account --dev signs in with.
	demoAdminEmail = "admin@xcloak.test"
)

// devOnThisMachine refuses development mode anywhere but on the machine
// it runs on: it drops Secure from cookies, makes administrators' second
// factor optional and prints a demo admin's password to the log, none of
// which may reach a network. addr must be a loopback address or
// localhost; publicURL, if set, must name a loopback address, localhost
// or a name under .localhost or .test, which no public DNS answers.
func devOnThisMachine(addr string, publicURL *url.URL) error {
	const refused = "--dev serves this machine only: %s %q is %s; without --dev, set XCLOAK_SECRET and XCLOAK_SMTP_URL (docs/DEPLOY.md)"
	host, _, err := net.SplitHostPort(addr)
	if err != nil || !localHost(host) {
		return fmt.Errorf(refused, "XCLOAK_ADDR", addr, "not a loopback address")
	}
	if publicURL == nil {
		return nil
	}
	if h := strings.ToLower(publicURL.Hostname()); !localHost(h) && !strings.HasSuffix(h, ".localhost") && !strings.HasSuffix(h, ".test") {
		return fmt.Errorf(refused, "XCLOAK_PUBLIC_URL", publicURL.String(), "a name others can reach")
	}
	return nil
}

// localHost reports whether host is a loopback address or localhost.
func localHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// loadDevSecret reads the development secret from path, first writing 32
// random bytes (hex) there, readable only by the owner, when the file is
// missing.
func loadDevSecret(path string) ([]byte, error) {
	secret, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		secret, err = createDevSecret(path)
	}
	if err != nil {
		return nil, fmt.Errorf("development secret: %w", err)
	}
	secret = bytes.TrimSpace(secret)
	if len(secret) < 32 {
		return nil, fmt.Errorf("development secret %s holds %d bytes, want at least 32; delete it to make a new one", path, len(secret))
	}
	return secret, nil
}

func createDevSecret(path string) ([]byte, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	secret := []byte(hex.EncodeToString(randomBytes(32)))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		// Another instance started at the same moment: use its secret.
		return os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	_, err = f.Write(append(secret, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return nil, err
	}
	return secret, nil
}

// resetDemoAdmin creates the demo admin, or gives the existing one a fresh
// password, and returns the password.
func resetDemoAdmin(ctx context.Context, b *backend) (string, error) {
	password := base64.RawURLEncoding.EncodeToString(randomBytes(16))
	_, err := b.svc.CreateUser(ctx, demoAdminEmail, password, true, "dev")
	if errors.Is(err, auth.ErrUserExists) {
		// A new password also ends the sessions signed in with the old one.
		err = b.svc.SetPassword(ctx, demoAdminEmail, password, "dev")
	}
	if err != nil {
		return "", fmt.Errorf("demo admin %s: %w", demoAdminEmail, err)
	}
	return password, nil
}

// randomBytes returns n bytes from crypto/rand, which never fails on the
// platforms Go supports.
func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// warnDemoAdmin logs an error while the demo admin of --dev is an
// account of the database a server without --dev uses, whatever its role
// or state: its password went to a log, a development database become a
// real one keeps it, and a member passes forward-auth too.
func warnDemoAdmin(ctx context.Context, b *backend, log *slog.Logger) {
	u, err := b.svc.UserByEmail(ctx, demoAdminEmail)
	if err != nil {
		return
	}
	role, state := "member", "enabled"
	if u.IsAdmin {
		role = "admin"
	}
	if u.Disabled() {
		state = "disabled"
	}
	log.Error("the demo admin of --dev, "+demoAdminEmail+", is an account of this database, with a password "+
		"a development start printed; delete it unless this is a developer's machine",
		"role", role, "state", state, "fix", "xcloak user delete --email "+demoAdminEmail+" --yes")
}
