// Package authtest provides an in-memory auth.Store, so that tests of the
// flows' logic and of the web layer's translation need no database, and
// TestStore, the promises of auth's storage interfaces as one table of
// cases that every implementation runs.
//
// Store keeps those promises (single-use tokens, guards on the password a
// sign-in verified, the bound on devices) with one mutex; what they cost
// in PostgreSQL (transactions, row locks, uniqueness under concurrency) is
// checked by running TestStore in package postgres, and by the flows'
// tests that use the real database.
package authtest
