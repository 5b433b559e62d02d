package webhook_test

import (
	"fmt"
	"time"

	"github.com/xcloak/xcloak/webhook"
)

// A receiver checks each request's X-XCloak-Signature against the raw
// body, before it parses the body, and drops an id it has taken already.
func ExampleVerify() {
	secret := []byte("0123456789abcdef0123456789abcdef-a-shared-secret")
	body := []byte(`{"id":"4f1c","type":"lockout.started","time":"2026-11-30T21:00:00Z","data":{"account":"ann@example.com"}}`)
	sent := time.Unix(1_795_000_000, 0)
	header := webhook.Sign(secret, sent, body) // what XCloak sends

	fmt.Println(webhook.Verify(secret, header, body, sent.Add(time.Minute)))
	fmt.Println(webhook.Verify(secret, header, []byte(`{"id":"forged"}`), sent))
	fmt.Println(webhook.Verify(secret, header, body, sent.Add(10*time.Minute)))
	// Output:
	// <nil>
	// webhook: signature does not match
	// webhook: signature too old or in the future
}
