// Package dashboard is the security team's data: the figures of a period
// (summaries, the per-minute series, the top sources and accounts), the
// lockouts in force, a page of security events, and the JSON the
// administrators' API serves them as.
//
// It reads through the interfaces it declares: Counters (package
// counters, in Redis), Store (package postgres) and Accounts
// (auth.Service). It knows no SQL, no Redis commands and no HTML.
package dashboard
