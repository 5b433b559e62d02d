// Package e2e holds XCloak's browser tests: journeys through the real pages
// in Chromium, driven by playwright-go, against a whole XCloak started per
// test on its own port, database, Redis key prefix and SMTP sink.
//
// The tests need Debian's Chromium and the Playwright driver pinned in
// package.json; setup.sh installs both and links the driver into driver/.
// `make e2e` runs the setup and then the tests; `make test` does the same
// before every other test. Run alone without the setup, the tests fail with
// a message that says so; they are never skipped.
//
// On failure each open page leaves a screenshot and its HTML under
// artifacts/, and the test log names the files. With
// XCLOAK_E2E_SCREENSHOTS=1 the tests also rewrite the full-page screenshots
// in docs/screenshots/ that the README shows.
package e2e
