package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

// errNotLoopback is returned for a host outside loopback when
// --allow-non-loopback was not given.
var errNotLoopback = errors.New("not a loopback address; stuffing attacks only this machine unless --allow-non-loopback is given")

// Bounds that keep every run finite whatever the flags say.
const (
	maxDuration    = 10 * time.Minute
	maxRequests    = 10_000_000
	maxConcurrency = 10_000
	maxTrials      = 100
	maxWorkers     = 4096
	maxSources     = 5000
	maxAccounts    = 1_000_000
	maxPasswords   = 1_000_000
)

// resolveHost returns the addresses host stands for, checked to be on
// loopback (127.0.0.0/8 or ::1) unless allow. An IP literal is not looked
// up. Every address must pass: a name that resolves to loopback and to
// something else is refused.
// nonLoopback returns the first address of host that is not on loopback,
// if any: a run that binds loopback source addresses cannot reach it.
func nonLoopback(ctx context.Context, host string) (netip.Addr, bool, error) {
	addrs, err := resolveHost(ctx, host, true)
	if err != nil {
		return netip.Addr{}, false, err
	}
	for _, a := range addrs {
		if !a.IsLoopback() {
			return a, true, nil
		}
	}
	return netip.Addr{}, false, nil
}

func resolveHost(ctx context.Context, host string, allow bool) ([]netip.Addr, error) {
	if host == "" {
		return nil, errors.New("no host given")
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		addrs = []netip.Addr{a.WithZone("")}
	} else {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		found, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, fmt.Errorf("resolving %s: %w", host, err)
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("%s resolves to no address", host)
		}
		addrs = found
	}
	for i, a := range addrs {
		a = a.Unmap()
		addrs[i] = a
		if !allow && !a.IsLoopback() {
			return nil, fmt.Errorf("%s (%s): %w", host, a, errNotLoopback)
		}
	}
	return addrs, nil
}

// checkTarget parses the URL of an XCloak to attack and checks its host.
// Only http and https are accepted, with no path beyond "/": the simulator
// adds the sign-in path itself.
func checkTarget(ctx context.Context, raw string, allow bool) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("target %q: want an http:// or https:// URL", raw)
	}
	if u.Host == "" || u.User != nil {
		return nil, fmt.Errorf("target %q: want scheme://host[:port] with no user", raw)
	}
	if _, err := resolveHost(ctx, u.Hostname(), allow); err != nil {
		return nil, fmt.Errorf("target: %w", err)
	}
	return u, nil
}

// checkHostPort checks the host of a host:port, such as a Redis address.
func checkHostPort(ctx context.Context, hostport string, allow bool) error {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return fmt.Errorf("%q is not host:port", hostport)
	}
	_, err = resolveHost(ctx, host, allow)
	return err
}

// guardedDialer dials only addresses that pass the loopback check, checked
// again at every dial: a cluster may announce other nodes' addresses, and a
// name may resolve differently the second time. The connection goes to the
// address that was checked.
type guardedDialer struct {
	allow bool
	// local, when set, is the source address connections are made from.
	local   net.Addr
	timeout time.Duration
}

// DialContext has the signature http.Transport and go-redis want.
func (g guardedDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	addrs, err := resolveHost(ctx, host, g.allow)
	if err != nil {
		return nil, err
	}
	timeout := g.timeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	d := net.Dialer{Timeout: timeout, LocalAddr: g.local, KeepAlive: 30 * time.Second}
	var firstErr error
	for _, a := range addrs {
		if g.local != nil && a.Is6() {
			continue // a source address from 127/8 cannot reach an IPv6 peer
		}
		c, err := d.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return c, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	if firstErr == nil {
		firstErr = fmt.Errorf("%s has no IPv4 address to reach from %s", host, g.local)
	}
	return nil, firstErr
}
