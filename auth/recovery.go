package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"strings"
)

// Recovery codes stand in for a lost factor, each once. An account gets
// RecoveryCodes of them with its first factor, shown once. Each is 80
// random bits, written as four groups of four characters of lowercase
// base32 ("k3np-7qxa-2m4d-wv5e"): so many that no one can guess one, so
// they are stored by a plain SHA-256, a fast hash, rather than a password
// hash, which exists to slow the guessing of secrets people choose. The
// hash is not keyed by the service secret either, so that rotating it
// leaves the codes working.

// RecoveryCodes is how many recovery codes an account gets.
const RecoveryCodes = 10

const recoveryBytes = 10 // 80 bits, 16 base32 characters

var recoveryEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newRecoveryCodes returns n new codes, as shown, and their hashes.
func newRecoveryCodes(n int) (codes []string, hashes [][]byte) {
	for range n {
		var b [recoveryBytes]byte
		rand.Read(b[:])
		s := recoveryEncoding.EncodeToString(b[:])
		codes = append(codes, s[0:4]+"-"+s[4:8]+"-"+s[8:12]+"-"+s[12:16])
		hashes = append(hashes, recoveryHash(s))
	}
	return codes, hashes
}

// normaliseRecoveryCode returns the code as hashed: without dashes and
// spaces, lower case; ok is false if it cannot be a recovery code.
func normaliseRecoveryCode(code string) (string, bool) {
	c := strings.ToLower(strings.NewReplacer("-", "", " ", "").Replace(code))
	if len(c) != 16 {
		return "", false
	}
	if _, err := recoveryEncoding.DecodeString(c); err != nil {
		return "", false
	}
	return c, true
}

func recoveryHash(normalised string) []byte {
	sum := sha256.Sum256([]byte(normalised))
	return sum[:]
}
