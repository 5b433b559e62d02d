package client_test

import (
	"context"
	"fmt"
	"log"
	"net/netip"
	"time"

	"github.com/xcloak/xcloak/client"
)

// checkPassword stands for the application's own password check.
func checkPassword(account, password string) bool { return password == "correct horse battery staple" }

// signIn is the application's sign-in: it asks XCloak, checks the password
// unless denied, and reports how the check went.
func signIn(ctx context.Context, xc *client.Client, account, password string, ip netip.Addr) string {
	d, err := xc.Attempt(ctx, client.AttemptRequest{Kind: client.Login, Account: account, ClientIP: ip})
	if err != nil {
		return "XCloak did not answer: " + err.Error()
	}
	if d.Kind == client.Deny {
		return fmt.Sprintf("refused (%s), retry in %v", d.Reason, d.RetryAfter.Round(time.Minute))
	}
	ok := checkPassword(account, password)
	if err := xc.Outcome(ctx, d.AttemptID, client.ResultOf(ok)); err != nil {
		return "outcome not recorded: " + err.Error()
	}
	switch {
	case d.Kind == client.Challenge:
		// The same answer whatever the password: a challenge is what a
		// credential-stuffing run meets, and telling it which of its
		// passwords were right is what it came for.
		return "verify the user another way first"
	case !ok:
		return "wrong password"
	}
	return "signed in"
}

// An application protects its sign-in: it asks XCloak before it checks the
// password, and reports how the check went. Here someone guesses one
// user's password until XCloak locks the account, which then refuses even
// the right one, before the application hashes anything.
func Example() {
	// xcloakURL and apiKey: XCloak's public URL, and the key printed by
	// `xcloak apikey add --name shop`.
	xc, err := client.New(xcloakURL, apiKey, client.WithTimeout(2*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	ip := netip.MustParseAddr("203.0.113.9")
	fmt.Println(signIn(ctx, xc, "bea@example.com", "correct horse battery staple", ip))
	for i := range 10 {
		answer := signIn(ctx, xc, "ann@example.com", fmt.Sprint("guess ", i), ip)
		if i == 0 || i == 9 {
			fmt.Println(answer)
		}
	}
	fmt.Println(signIn(ctx, xc, "ann@example.com", "correct horse battery staple", ip))
	// Output:
	// signed in
	// wrong password
	// wrong password
	// refused (locked), retry in 15m0s
}
