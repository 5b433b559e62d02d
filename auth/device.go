package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"time"
)

// Device cookies follow OWASP's "slow down online guessing" design: after a
// successful sign-in the browser gets a cookie bound to the account
// (LOGIN,NONCE,HMAC). Attempts that carry one of the account's known
// devices (a valid MAC and a stored nonce: known_devices.go) are limited
// and locked per device instead of per account and pass the account's
// lockout, so an attacker who locks an account out does not lock out the
// browsers its owner already uses, and a device that guesses locks only
// itself.
//
// The address is not in the cookie: both the cookie's name and its MAC are
// derived from it, so the cookie is only valid for the account it was issued
// for and does not disclose it.

// DeviceCookie is a cookie for the web layer to set.
type DeviceCookie struct {
	// Name is the cookie's name, specific to the account.
	Name string
	// Value is NONCE.MAC, both unpadded base64url.
	Value string
	// Expires is when the browser should drop it.
	Expires time.Time
}

// devices issues and checks device cookies with a key derived from the
// service secret.
type devices struct {
	key []byte
	ttl time.Duration
}

func newDevices(secret []byte, ttl time.Duration) devices {
	return devices{key: deriveKey(secret, "device-cookie"), ttl: ttl}
}

// deriveKey gives each use of the service secret its own key.
func deriveKey(secret []byte, purpose string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("xcloak/" + purpose))
	return m.Sum(nil)
}

func (d devices) mac(parts ...string) []byte {
	m := hmac.New(sha256.New, d.key)
	for _, p := range parts {
		// Length-free joining is safe here: NUL cannot occur in a
		// normalised email or in base64url.
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return m.Sum(nil)
}

// CookieName returns the name of email's device cookie.
func (d devices) CookieName(email string) string {
	return "xcloak_device_" + base64.RawURLEncoding.EncodeToString(d.mac("name", email)[:12])
}

// Issue returns a new device cookie for email and its nonce, which only
// becomes a known device once stored (Service.addDevice).
func (d devices) Issue(email string, now time.Time) (DeviceCookie, string) {
	n := newNonce()
	return d.cookie(email, n, now), n
}

// newNonce returns a new device nonce: 128 random bits in unpadded
// base64url (22 characters).
func newNonce() string {
	var nonce [16]byte
	rand.Read(nonce[:])
	return base64.RawURLEncoding.EncodeToString(nonce[:])
}

// cookie returns email's device cookie for nonce n, issued now.
func (d devices) cookie(email, n string, now time.Time) DeviceCookie {
	return DeviceCookie{
		Name:    d.CookieName(email),
		Value:   n + "." + base64.RawURLEncoding.EncodeToString(d.mac("value", email, n)),
		Expires: now.Add(d.ttl),
	}
}

// Check returns the device's nonce if value is a cookie this service issued
// for email.
func (d devices) Check(email, value string) (nonce string, ok bool) {
	n, sig, found := strings.Cut(value, ".")
	if !found || len(n) != 22 || len(sig) > 64 {
		return "", false
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, d.mac("value", email, n)) {
		return "", false
	}
	return n, true
}
