package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
)

// Smart lockout: a failed sign-in is counted towards a lockout with a
// fingerprint of the password tried, and the lockouts count a password
// their identity already failed with only once (ratelimit.Store.Fail). A
// user retyping an old password is not locked out by it, while an
// attacker, whose every guess is a new password, is counted as before.
//
// The fingerprint is an HMAC under a key derived from the service secret,
// so neither the password nor a plain hash of it, which a dictionary
// would reverse, is ever stored. It is keyed by the identity too (the
// account or the device), so that the same password tried on two accounts
// gives two unrelated fingerprints: what the lockouts keep says nothing
// about which accounts were tried with the same password.

// attempts fingerprints failed sign-in attempts with a key derived from the
// service secret.
type attempts struct {
	key []byte
}

func newAttempts(secret []byte) attempts {
	return attempts{key: deriveKey(secret, "attempt-fingerprint")}
}

// fingerprint returns the fingerprint of password tried for id (a
// normalised email or a device's nonce): 128 bits of HMAC-SHA256 over the
// password as typed, in unpadded base64url.
//
// As typed, not normalised: a password that NFKC changes is checked in
// two forms, the normalised one and the one typed, which a hash stored
// before passwords were normalised holds (Hasher.Verify). Against such a
// hash each way of typing a password (a full-width letter here and not
// there) is a guess of its own, and must count as one: were the forms
// one fingerprint, the first refused would let every other be tried
// without counting. A password NFKC leaves as it is, what nearly everyone
// types, has the fingerprint it always had.
func (a attempts) fingerprint(id, password string) string {
	m := hmac.New(sha256.New, a.key)
	// The identity's length first: no id and password can be joined the
	// same way as another pair.
	m.Write(binary.BigEndian.AppendUint64(nil, uint64(len(id))))
	m.Write([]byte(id))
	m.Write([]byte(password))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:16])
}
