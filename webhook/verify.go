package webhook

// This file is what the README shows a receiver: keep it to the standard
// library, and the README's copy in step (readme_test.go checks it).

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Verify checks the X-XCloak-Signature header of a webhook request whose
// body is body: its time t must be within 5 minutes of now, and one of its
// v1 values the HMAC-SHA256 of "<t>.<body>" keyed with secret. A secret
// shorter than XCloak accepts (32 bytes) is refused: one that failed to
// load would take what anyone signs with the empty key.
func Verify(secret []byte, header string, body []byte, now time.Time) error {
	if len(secret) < 32 {
		return errors.New("webhook: the secret is missing or shorter than 32 bytes")
	}
	var ts string
	var sigs [][]byte
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			if sig, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, sig)
			}
		}
	}
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return errors.New("webhook: malformed signature header")
	}
	if d := now.Sub(time.Unix(t, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return errors.New("webhook: signature too old or in the future")
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	for _, sig := range sigs {
		if hmac.Equal(sig, want) {
			return nil
		}
	}
	return errors.New("webhook: signature does not match")
}
