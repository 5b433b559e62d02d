package auth

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base32"
	"encoding/binary"
	"errors"
	"strings"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"
)

// TOTP factors: RFC 6238 codes of six digits every 30 seconds, HMAC-SHA1,
// as every authenticator app reads them from an otpauth:// URL. A code is
// accepted for the current step and the one either side (a phone's clock
// a little off, a code typed as it turned), and once: its step is stored
// as the factor's last (FactorStore.UseTOTPStep), and a code of that step
// or an earlier one is refused after.

const (
	totpPeriod    = 30 * time.Second
	totpSkew      = 1 // steps either side of the current one
	totpDigits    = otp.DigitsSix
	totpSecretLen = 20 // bytes: RFC 4226's recommended 160 bits
)

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

// totpOpts are the code parameters, the same for generating and checking.
var totpOpts = totp.ValidateOpts{Period: uint(totpPeriod / time.Second), Digits: totpDigits, Algorithm: otp.AlgorithmSHA1}

// newTOTPKey draws a secret and returns it with its otpauth:// URL for the
// account email.
func newTOTPKey(issuer, email string) (secret []byte, url string, err error) {
	secret = make([]byte, totpSecretLen)
	rand.Read(secret)
	url, err = totpURL(issuer, email, secret)
	return secret, url, err
}

// totpURL is the otpauth:// URL of secret for the account email.
func totpURL(issuer, email string, secret []byte) (string, error) {
	key, err := totp.Generate(totp.GenerateOpts{Issuer: issuer, AccountName: email, Secret: secret,
		Period: totpOpts.Period, Digits: totpDigits, Algorithm: otp.AlgorithmSHA1})
	if err != nil {
		return "", err
	}
	return key.URL(), nil
}

// totpStep is the time step at t.
func totpStep(t time.Time) int64 { return t.Unix() / int64(totpPeriod/time.Second) }

// matchTOTP returns the step within the skew of now whose code is code,
// comparing every candidate in constant time; ok is false if none is.
func matchTOTP(secret []byte, code string, now time.Time) (step int64, ok bool) {
	key := b32.EncodeToString(secret)
	cur := totpStep(now)
	for s := cur - totpSkew; s <= cur+totpSkew; s++ {
		want, err := totp.GenerateCodeCustom(key, time.Unix(s*int64(totpPeriod/time.Second), 0), totpOpts)
		if err != nil {
			return 0, false
		}
		if subtle.ConstantTimeCompare([]byte(want), []byte(code)) == 1 && !ok {
			step, ok = s, true
		}
	}
	return step, ok
}

// isTOTPCode reports whether code looks like a TOTP code: six digits.
func isTOTPCode(code string) bool {
	return len(code) == totpDigits.Length() && strings.Trim(code, "0123456789") == ""
}

// Sealed secrets. A TOTP secret must be readable to check codes, so it
// cannot be hashed: with Config.MFA.Key set it is sealed with AES-256-GCM,
// the account's id as associated data (a sealed secret copied to another
// account's row does not open), and a copy of the database alone yields no
// secret. Without a key it is stored as it is: anyone who reads the
// database can then compute the account's codes, though still not its
// password. A leading byte says which, so that a key can be set on a
// deployment that has plain secrets already: they are still read, and
// the factors enrolled from then on are sealed.
const (
	secretPlain  byte = 0
	secretSealed byte = 1
)

// errSecretSealed: a sealed secret and no key to open it (the key was
// removed, or another one set).
var errSecretSealed = errors.New("auth: TOTP secret sealed with another key, or no key is set")

func sealSecret(key []byte, userID int64, secret []byte) []byte {
	if key == nil {
		return append([]byte{secretPlain}, secret...)
	}
	aead := newAEAD(key)
	nonce := make([]byte, aead.NonceSize())
	rand.Read(nonce)
	out := append([]byte{secretSealed}, nonce...)
	return aead.Seal(out, nonce, secret, secretAD(userID))
}

func openSecret(key []byte, userID int64, sealed []byte) ([]byte, error) {
	if len(sealed) == 0 {
		return nil, errors.New("auth: empty TOTP secret")
	}
	switch sealed[0] {
	case secretPlain:
		return sealed[1:], nil
	case secretSealed:
		if key == nil {
			return nil, errSecretSealed
		}
		aead := newAEAD(key)
		rest := sealed[1:]
		if len(rest) < aead.NonceSize() {
			return nil, errSecretSealed
		}
		secret, err := aead.Open(nil, rest[:aead.NonceSize()], rest[aead.NonceSize():], secretAD(userID))
		if err != nil {
			return nil, errSecretSealed
		}
		return secret, nil
	}
	return nil, errors.New("auth: TOTP secret of an unknown format")
}

func newAEAD(key []byte) cipher.AEAD {
	block, err := aes.NewCipher(key)
	if err != nil {
		panic("auth: the MFA key was checked to be 32 bytes: " + err.Error())
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return aead
}

func secretAD(userID int64) []byte {
	return binary.BigEndian.AppendUint64([]byte("xcloak totp "), uint64(userID))
}
