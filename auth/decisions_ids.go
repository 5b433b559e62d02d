package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"strings"
	"time"
)

// Attempt ids. A decision hands the application an attempt id, which its
// outcome names later. The id is self-contained and signed, so a decision
// writes nothing for it and costs no round trip beyond its limits:
//
//	base64url(payload) "." base64url(HMAC-SHA256(payload))
//
// under a key derived from the service secret for this use alone. The
// payload is JSON: the API key's id, the kind, the folded account, the
// hash of the account as sent (under which its known devices are kept),
// the client's address, the device's hash and whether it was known, whether the
// decision was a challenge, when it was issued, and a random nonce. It is
// signed, not encrypted: the application sent all of it, and may read it.
//
// An id works for its kind's life after it was issued (attempt.ttl), for
// the key that asked only, and once: the outcome marks its nonce used in
// the limits, shared by every replica, for the id's whole life
// (Service.AttemptOutcome).

// AttemptTTL is how long a sign-in's attempt id can be given an outcome:
// its password is checked at once.
const AttemptTTL = 10 * time.Minute

// ResetAttemptTTL is how long a reset's attempt id can be given an
// outcome: its success is the new password stored, once the user has
// opened the application's mail, perhaps hours later.
const ResetAttemptTTL = 24 * time.Hour

// clockSlack is how far replicas' clocks may differ: an id issued by one
// a second ahead is taken, and its nonce's mark outlives the id's life by
// as much as a replica's clock may lag.
const clockSlack = time.Second

// maxAttemptIDBytes bounds an id that is read. It is above the longest id
// issue makes: an account of MaxAccountBytes of '<', '>' or '&', which
// encoding/json writes at six bytes each, with the rest of the payload
// (an application's name of MaxAPIKeyName bytes included) at its longest,
// is about 3,000 bytes once in base64url and signed. An
// id refused for its length would leave its account's failures
// uncounted.
const maxAttemptIDBytes = 4096

// decisionKeys are the keys of the decision API, derived from the secret.
type decisionKeys struct {
	attemptID []byte // signs attempt ids
	device    []byte // keys the applications' device hashes
	account   []byte // keys the applications' account hashes
}

func newDecisionKeys(secret []byte) decisionKeys {
	return decisionKeys{attemptID: deriveKey(secret, "attempt-id"), device: deriveKey(secret, "app-device"),
		account: deriveKey(secret, "app-account")}
}

// attempt is what an attempt id carries.
type attempt struct {
	KeyID int64 `json:"k"`
	// App is the application of the key that asked: any of its keys may
	// report the outcome (reportableBy). "" in an id issued before it was
	// kept, which only that key may report.
	App     string `json:"ap,omitempty"`
	Kind    string `json:"t"`
	Account string `json:"a"` // folded, without the application's namespace
	// Devices is the base64url of the hash (decisionKeys.accountHash) of
	// the account as the application sent it, unfolded, under which its
	// known devices are kept (knownAs); "" in an id issued before it was
	// kept.
	Devices   string `json:"ad,omitempty"`
	Client    string `json:"ip"`           // the client's address
	Device    string `json:"d,omitempty"`  // the device's hash, "" without a device
	Known     bool   `json:"kn,omitempty"` // the device was a known one
	Challenge bool   `json:"c,omitempty"`
	IssuedAt  int64  `json:"at"` // Unix seconds
	// IssuedMilli is when it was issued to the millisecond, for the
	// order of a sign-in and its account's reset (appSucceeded); 0 in an
	// id issued before it was kept.
	IssuedMilli int64  `json:"ms,omitempty"`
	Nonce       string `json:"n"`
	// Place is the attempt's place towards the lockout of lockIdentity,
	// held until its outcome (ratelimit.Begun's Token); "" in an id
	// issued before attempts held places, and in a reset's.
	Place string `json:"pl,omitempty"`
}

// devicesOf returns the hash under which the known devices of a's account
// are kept: of the account as sent (knownAs), or, in an id issued before
// that was kept, of the folded one, as its devices were kept then.
func (k decisionKeys) devicesOf(app string, a attempt) []byte {
	if h, err := base64.RawURLEncoding.DecodeString(a.Devices); err == nil && len(h) == sha256.Size {
		return h
	}
	return k.accountHash(app, a.Account)
}

// lockIdentity is the rule and identity whose lockout a sign-in attempt
// a of account (appAccount) counts towards: its known device's, or else
// its account's (countAppFailure).
func (a attempt) lockIdentity(account string) (rule, id string) {
	if a.Known {
		return RuleLoginDevice, appDevice(a.Device)
	}
	return RuleLoginAccount, account
}

// reportableBy reports whether key may report a's outcome: a key of the
// application that asked, the one that asked or one that replaced it
// (AddAPIKeyFor), since both speak for the same accounts. A reset's id
// lasts a day, which a rotation must not cut short: its success would
// then end no lockout and forget no device.
func (a attempt) reportableBy(key APIKey) bool {
	return a.KeyID == key.ID || (a.App != "" && a.App == key.App)
}

// issue returns the signed id of a.
func (k decisionKeys) issue(a attempt) string {
	var nonce [16]byte
	rand.Read(nonce[:])
	a.Nonce = base64.RawURLEncoding.EncodeToString(nonce[:])
	payload, _ := json.Marshal(a) // strings and numbers only: cannot fail
	body := base64.RawURLEncoding.EncodeToString(payload)
	return body + "." + base64.RawURLEncoding.EncodeToString(k.sign(body))
}

func (k decisionKeys) sign(body string) []byte {
	m := hmac.New(sha256.New, k.attemptID)
	m.Write([]byte(body))
	return m.Sum(nil)
}

// open returns the attempt id names if this service signed it and it has
// not expired at now; ok is false for anything else, alike.
func (k decisionKeys) open(id string, now time.Time) (a attempt, ok bool) {
	if len(id) > maxAttemptIDBytes {
		return attempt{}, false
	}
	body, sig, found := strings.Cut(id, ".")
	if !found {
		return attempt{}, false
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, k.sign(body)) {
		return attempt{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil || json.Unmarshal(payload, &a) != nil || a.Nonce == "" {
		return attempt{}, false
	}
	issued := time.Unix(a.IssuedAt, 0)
	if now.Sub(issued) >= a.ttl() || issued.After(now.Add(clockSlack)) {
		return attempt{}, false
	}
	return a, true
}

// decided is when a's decision was made: to the millisecond if its id
// says so, else to the second, rounded down.
func (a attempt) decided() time.Time {
	if a.IssuedMilli != 0 {
		return time.UnixMilli(a.IssuedMilli)
	}
	return time.Unix(a.IssuedAt, 0)
}

// ttl is how long a's id can be given an outcome after it was issued.
func (a attempt) ttl() time.Duration {
	if a.Kind == AttemptReset {
		return ResetAttemptTTL
	}
	return AttemptTTL
}

// deviceHash keys a device id an application reports for one of its
// accounts: an HMAC of the application's name, the account as sent
// (knownAs) and the id, each length-prefixed, so that no two triples hash
// alike and a copy of the database names none of them.
func (k decisionKeys) deviceHash(app, account, device string) []byte {
	return lengthPrefixedMAC(k.device, app, account, device)
}

// accountHash keys an application's account, by which its known devices
// are found: an HMAC of the application's name and the account as sent
// (knownAs),
// each length-prefixed, under a key of its own, so that it matches no
// device hash and a copy of the database names no account.
func (k decisionKeys) accountHash(app, account string) []byte {
	return lengthPrefixedMAC(k.account, app, account)
}

// lengthPrefixedMAC is the HMAC-SHA256 under key of parts, each prefixed
// with its length, so that no two lists of parts hash alike.
func lengthPrefixedMAC(key []byte, parts ...string) []byte {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write(binary.BigEndian.AppendUint64(nil, uint64(len(p))))
		m.Write([]byte(p))
	}
	return m.Sum(nil)
}
