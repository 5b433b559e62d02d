// Package auth owns XCloak's accounts and what protects them: users, password
// hashing, sessions, password reset tokens, lockouts after repeated failures,
// device cookies and the security events they produce.
//
// It knows nothing of HTML or HTTP: it speaks in Go values and returns
// sentinel errors, and the web layer maps those to pages and status codes.
//
// It keeps the types, the errors and the flows (sign-in, reset, unlock
// links, sessions, known devices) and declares, in store.go, the storage
// those flows need: users, sessions, known devices, reset and unlock
// tokens, the lockout log and the janitor's sweep. Each interface is shaped
// by what a flow does, so what must happen at once (a new password ending
// every session and device the old one gave, a token spent with what it
// grants) is one method. Package postgres implements them with SQL;
// package authtest keeps them in memory for tests, and its TestStore holds
// both to the same promises. The flows hand stores hashes of tokens and
// nonces only, and the timestamps of Deps.Now.
//
// Where its events go it declares and does not know: EventStore (package
// postgres) and EventCounter (package counters). Nor does it know where
// its limits are kept: it declares the Limiter it decides requests by
// (limits.go), which internal/app builds from Redis and authtest from an
// in-process store.
package auth
