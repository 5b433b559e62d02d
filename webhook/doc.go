// Package webhook tells other systems of XCloak's security events of
// interest (a lockout started or ended, an account unlocked, attack mode
// started, ended or switched by an administrator, a sign-in held for
// verification, a user created, disabled, enabled, deleted, promoted or
// demoted, a password set or second factors removed by an administrator,
// an API key created or revoked) by POSTing each as signed JSON to the
// receivers' URLs.
//
// A Sender hears the security events as they are written (it is an
// auth.EventHook), keeps those of interest as Events and delivers them off
// the request path: one bounded queue and its own workers per URL, so
// that a dead receiver fills only its own queue; each attempt bounded in
// time, retried with exponential backoff and jitter on network errors,
// 5xx and 429 (honouring Retry-After within bounds), given up after a
// bounded number of attempts or at once on another 4xx; no redirect
// followed. Queuing never blocks: when a URL's queue is full the delivery
// is dropped and counted.
//
// Each request carries the header X-XCloak-Signature:
//
//	t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">
//
// keyed with the shared secret. Verify is how a receiver checks it; the
// README shows its code.
package webhook
