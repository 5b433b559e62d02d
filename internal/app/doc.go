// Package app assembles XCloak from connections its callers opened: the
// Postgres store, the dashboard's counters, the auth service and the
// dashboard's reader, built one way for serve, the HTTP test harness
// (internal/xcloaktest) and auth's own tests.
//
// It opens nothing and closes nothing: what a connection is (Redis client
// options, pool size, migrations) differs between serve and the tests, and
// stays with them. What it builds from those connections is the same
// everywhere, so a test runs the service serve runs.
package app
