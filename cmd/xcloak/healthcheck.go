package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/xcloak/xcloak/internal/cli"
)

// healthcheckTimeout bounds the whole check, so that a server that accepts
// connections but never answers fails it rather than hanging the
// container's health check.
const healthcheckTimeout = 3 * time.Second

// healthcheck asks the server at XCLOAK_ADDR whether it is ready: nil when
// GET /readyz answers 200. It is the container's health check, so it needs
// nothing the image lacks (no shell, no curl).
func healthcheck(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("xcloak", "healthcheck", "[flags]",
		"Exits 0 when GET /readyz on the server at XCLOAK_ADDR answers 200, else 1\n"+
			"with the reason; a server listening on every interface is asked through\n"+
			"loopback. For a container's health check.\n")
	cfg, err := loadConfig(fs, args, getenv, stdout, stderr, forHealthcheck)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	url, err := readyzURL(cfg.Addr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, healthcheckTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	// Straight to the server: no proxy from the environment, no redirect.
	client := &http.Client{
		Transport:     &http.Transport{DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	fmt.Fprintf(stdout, "GET %s: %s\n", url, resp.Status)
	return nil
}

// readyzURL is the URL of /readyz on the server listening on addr: an
// unspecified host (every interface) is reached through its loopback.
func readyzURL(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if port == "0" {
		return "", fmt.Errorf("XCLOAK_ADDR %s: port 0 names no server to check", addr)
	}
	switch ip := net.ParseIP(host); {
	case host == "" || ip.Equal(net.IPv4zero):
		host = "127.0.0.1"
	case ip.Equal(net.IPv6unspecified):
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/readyz", nil
}
