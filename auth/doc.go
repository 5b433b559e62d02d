// Package auth owns XCloak's accounts and what protects them: users, password
// hashing, sessions, password reset tokens, lockouts after repeated failures,
// device cookies and the security events they produce.
//
// It knows nothing of HTML or HTTP: it speaks in Go values and returns
// sentinel errors, and the web layer maps those to pages and status codes.
// Where its events go it declares and does not know: EventStore (package
// postgres) and EventCounter (package counters).
package auth
