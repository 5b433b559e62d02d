package ratelimit

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
)

// Keys build the Redis keys of one kind of record (a rule's log, an
// account's lockout state) under a prefix.
//
// A key is prefix + "{" + kind + ":" + digest + "}" + suffix. The identifier
// (an address, an email, a device id) enters only as digest, the first 128
// bits of its SHA-256 in unpadded base64url, so no identifier, whatever bytes
// it holds ('{', '}', ':', NUL, invalid UTF-8), can end the hash tag early,
// reach another kind's keys or collide with another identifier. Every key of
// one identity shares the tag and therefore one Redis Cluster slot, so one
// script may touch all of them.
type Keys struct {
	prefix string
	kind   string
}

// NewKeys returns the key builder for records of kind under prefix. The
// prefix is the deployment's namespace (tests use one per test) and must not
// contain '{' or '}', which would move the hash tag; kind must be a short name
// of lower-case letters, digits and '_'.
func NewKeys(prefix, kind string) (Keys, error) {
	if strings.ContainsAny(prefix, "{}") {
		return Keys{}, fmt.Errorf("ratelimit: key prefix %q must not contain '{' or '}'", prefix)
	}
	if err := checkName(kind); err != nil {
		return Keys{}, fmt.Errorf("ratelimit: kind %q: %w", kind, err)
	}
	return Keys{prefix: prefix, kind: kind}, nil
}

// Key returns the key of identifier id with an optional suffix, such as
// ":level", that names one of several records of the same identity.
// Suffixes are chosen by code, never by users.
func (k Keys) Key(id string, suffix string) string {
	var d [digestLen]byte
	digest(&d, id)
	var b strings.Builder
	b.Grow(k.keyLen(suffix))
	k.write(&b, &d, suffix)
	return b.String()
}

// keyLen is the length of k's keys with suffix.
func (k Keys) keyLen(suffix string) int {
	return len(k.prefix) + len(k.kind) + digestLen + 3 + len(suffix)
}

// write writes to b the key of the identifier whose digest is d, with
// suffix.
func (k Keys) write(b *strings.Builder, d *[digestLen]byte, suffix string) {
	b.WriteString(k.prefix)
	b.WriteByte('{')
	b.WriteString(k.kind)
	b.WriteByte(':')
	b.Write(d[:])
	b.WriteByte('}')
	b.WriteString(suffix)
}

// logSuffix ends the key of a rule's log: the packed string of
// sliding_window.lua. The sorted sets of XCloak before it had keys without
// a suffix, and the packed logs whose header held no expiry ":log2"; new
// names keep the formats from ever reading each other's keys while both
// run (see docs/DEPLOY.md on upgrades).
const logSuffix = ":log3"

// lockSuffix ends the key of an identity's lock (lockout.lua).
const lockSuffix = ":lock"

// Log returns the key of the log of identifier id under the rule k names.
func (k Keys) Log(id string) string { return k.Key(id, logSuffix) }

// Digest returns the 22-character form of id used inside keys.
func Digest(id string) string {
	var d [digestLen]byte
	digest(&d, id)
	return string(d[:])
}

// digestLen is the length of a Digest: 128 bits in unpadded base64.
const digestLen = 22

// digest writes id's Digest into d.
func digest(d *[digestLen]byte, id string) {
	sum := sha256.Sum256([]byte(id))
	base64.RawURLEncoding.Encode(d[:], sum[:16])
}

// checkName accepts 1 to 32 characters from [a-z0-9_].
func checkName(s string) error {
	if len(s) == 0 || len(s) > 32 {
		return fmt.Errorf("want 1 to 32 characters, got %d", len(s))
	}
	for _, c := range []byte(s) {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return fmt.Errorf("character %q not in [a-z0-9_]", c)
		}
	}
	return nil
}

// slot returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of its
// hash tag, the text between the first '{' and the next '}' when that is
// not empty, else of the whole key, modulo 16384. Rules whose keys share a
// slot can be decided by one script on a cluster.
func slot(key string) int {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			key = key[open+1 : open+1+end]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}
