// Command ownusers is a tiny web application with its own users that
// protects its sign-in form with XCloak's decision API: before it checks a
// password it asks XCloak whether the attempt may go ahead, and afterwards
// it says how the check went. See README.md beside this file.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/xcloak/xcloak/client"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "ownusers:", err)
		os.Exit(1)
	}
}

// demoUser is the one account the app has.
const demoUser = "ann@example.com"

// run serves the app until ctx ends.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := flag.NewFlagSet("ownusers", flag.ContinueOnError)
	fs.SetOutput(stdout)
	addr := fs.String("addr", "127.0.0.1:8081", "address to listen on")
	xcloakURL := fs.String("xcloak-url", or(getenv("XCLOAK_URL"), "http://127.0.0.1:8080"), "XCloak's URL (env XCLOAK_URL)")
	keyFile := fs.String("api-key-file", "", "file holding the API key (else env XCLOAK_API_KEY)")
	proxies := fs.String("trusted-proxies", "", "comma-separated CIDRs of proxies whose X-Forwarded-For is believed")
	insecure := fs.Bool("insecure-cookies", false, "send cookies without Secure, to serve plain http")
	if err := fs.Parse(args); err != nil {
		return err
	}

	key := getenv("XCLOAK_API_KEY")
	if *keyFile != "" {
		b, err := os.ReadFile(*keyFile)
		if err != nil {
			return err
		}
		key = strings.TrimSpace(string(b))
	}
	if key == "" {
		return errors.New("no API key: set XCLOAK_API_KEY or -api-key-file to a key from `xcloak apikey add --name ownusers`")
	}
	xc, err := client.New(*xcloakURL, key)
	if err != nil {
		return err
	}
	var trusted []netip.Prefix
	for s := range strings.SplitSeq(*proxies, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return fmt.Errorf("-trusted-proxies: %w", err)
		}
		trusted = append(trusted, p.Masked())
	}

	password := randomID()
	app, err := NewApp(Config{XCloak: xc, Users: map[string]string{demoUser: password}, TrustedProxies: trusted, InsecureCookies: *insecure})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "ownusers listening on http://%s, asking XCloak at %s\n", ln.Addr(), *xcloakURL)
	fmt.Fprintf(stdout, "Demo user: %s / %s\n", demoUser, password)

	srv := &http.Server{Handler: app.Handler(), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(shutdown)
	}
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
