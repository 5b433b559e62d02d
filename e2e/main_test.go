package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/playwright-community/playwright-go"
)

// setupHint ends every message about a missing or broken setup.
const setupHint = "run `make e2e` (or e2e/setup.sh) to install Chromium and the Playwright driver"

// chromiumPaths are where Debian's chromium package puts the browser, in
// order of preference: the binary itself, then the wrapper script, which
// works too but prints a harmless shell warning on every start.
var chromiumPaths = []string{"/usr/lib/chromium/chromium", "/usr/bin/chromium"}

// chromiumArgs keep a headless Chromium quiet and independent of the
// machine: no sandbox (the tests may run as root), no GPU, no background
// traffic to anyone. Every *.xcloak.test name is 127.0.0.1, so that the
// forward-auth journeys can give XCloak and the applications behind a
// proxy names of their own, and a cookie domain over them, without DNS.
var chromiumArgs = []string{
	"--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
	"--disable-background-networking", "--disable-component-update",
	"--disable-sync", "--no-first-run",
	"--host-resolver-rules=MAP *.xcloak.test 127.0.0.1",
}

// driver is the one Playwright instance and browser of this test binary,
// started by the first test that needs it and stopped by TestMain; every
// journey gets its own context in it.
var driver struct {
	once    sync.Once
	pw      *playwright.Playwright
	browser playwright.Browser
	err     error
}

// TestMain stops the browser and the driver once every test has run. The
// package starts no Redis Cluster, so testenv.Main, which exits the process
// itself and would leave the browser running, is not used.
func TestMain(m *testing.M) {
	code := m.Run()
	if err := stopBrowser(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: stopping the browser:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// browser returns the shared browser, starting it on first use. A missing
// setup fails the test with what to run; it never skips it.
func browser(t *testing.T) playwright.Browser {
	t.Helper()
	driver.once.Do(func() { driver.pw, driver.browser, driver.err = startBrowser() })
	if driver.err != nil {
		t.Fatalf("e2e: %v\n%s", driver.err, setupHint)
	}
	return driver.browser
}

// startBrowser runs the driver that setup.sh linked into driver/ and launches
// Debian's Chromium through it. It never downloads anything: the library's
// Run only runs a driver that is already there.
func startBrowser() (*playwright.Playwright, playwright.Browser, error) {
	dir, err := filepath.Abs("driver")
	if err != nil {
		return nil, nil, err
	}
	for _, need := range []string{"node", filepath.Join("package", "cli.js")} {
		if _, err := os.Stat(filepath.Join(dir, need)); err != nil {
			return nil, nil, fmt.Errorf("the Playwright driver is not set up: %w", err)
		}
	}
	exe, err := chromiumPath()
	if err != nil {
		return nil, nil, err
	}
	pw, err := playwright.Run(&playwright.RunOptions{DriverDirectory: dir, SkipInstallBrowsers: true, Verbose: false})
	if err != nil {
		return nil, nil, fmt.Errorf("starting the Playwright driver in %s: %w", dir, err)
	}
	b, err := pw.Chromium.Launch(playwright.BrowserTypeLaunchOptions{
		ExecutablePath: playwright.String(exe),
		Headless:       playwright.Bool(true),
		Args:           chromiumArgs,
	})
	if err != nil {
		_ = pw.Stop()
		return nil, nil, fmt.Errorf("launching %s: %w", exe, err)
	}
	return pw, b, nil
}

// chromiumPath returns the first Chromium binary of chromiumPaths that
// exists.
func chromiumPath() (string, error) {
	for _, p := range chromiumPaths {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no Chromium at %v", chromiumPaths)
}

// stopBrowser closes the browser and stops the driver, if a test started
// them.
func stopBrowser() error {
	if driver.pw == nil {
		return nil
	}
	var errs []error
	if driver.browser != nil {
		errs = append(errs, driver.browser.Close())
	}
	errs = append(errs, driver.pw.Stop())
	return errors.Join(errs...)
}
