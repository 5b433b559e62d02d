// Package postgres keeps what XCloak must not lose in PostgreSQL: users,
// sessions, reset and unlock tokens, known devices, the lockout log and
// the security events. It implements the storage interfaces that package
// auth declares (auth.Store) and the reads the dashboard needs; it holds
// SQL and no policy: what is expired, how many devices an account keeps
// and which password a write must still find are decided by auth and
// passed in. The schema lives in package migrations.
//
// Where auth asks for several changes at once (a new password with the
// sessions and devices it ends, a token spent with the device it adds),
// one method runs them in one transaction, and locks the account's row
// where concurrent requests must be serialised. authtest.TestStore, run
// by this package's tests, checks those promises against a real database.
package postgres
