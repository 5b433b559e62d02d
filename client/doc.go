// Package client is the Go client of XCloak's decision API, for an
// application that keeps its own users and passwords and asks XCloak
// whether a sign-in or reset attempt may go ahead.
//
// The application calls [Client.Attempt] before it looks at the password,
// so that XCloak's limits, lockouts and attack mode come before any
// hashing, and [Client.Outcome] once it knows whether the password was
// right:
//
//	d, err := xc.Attempt(ctx, client.AttemptRequest{Kind: client.Login, Account: email, ClientIP: ip})
//	switch {
//	case errors.Is(err, client.ErrUnavailable):
//		// XCloak did not answer: refuse, or let the attempt through
//		// unprotected (your policy).
//	case err != nil:
//		// XCloak refused the request, or answered what it never does:
//		// refuse the attempt, whatever your policy above.
//	case d.Kind == client.Deny:
//		// 429 with Retry-After: d.RetryAfter
//	default:
//		ok := checkPassword(email, password)
//		// Not under the request's context alone: a browser that hangs up
//		// once its password is checked must not keep its failure from counting.
//		_ = xc.Outcome(context.WithoutCancel(ctx), d.AttemptID, client.ResultOf(ok))
//		// d.Kind == client.Challenge: verify the user another way before
//		// granting a session, whatever the password.
//	}
//
// The package sits at the top of the module, as
// github.com/xcloak/xcloak/client, rather than under internal/ or beside
// the server's packages, because it is the one package that other
// programs import: it depends on nothing of XCloak's server (no Redis,
// Postgres or templates come with it), only on the standard library, so
// an application takes in a few hundred lines and not the service.
//
// A Client is safe for concurrent use. It never logs, and it never puts its
// API key in an error or in what fmt prints of it.
package client
