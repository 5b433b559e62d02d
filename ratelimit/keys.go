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
	return k.prefix + "{" + k.kind + ":" + Digest(id) + "}" + suffix
}

// logSuffix ends the key of a rule's log: the packed string of
// sliding_window.lua. The sorted sets of XCloak before it had keys without
// a suffix; new names keep the two formats from ever reading each other's
// keys while both run (see docs/DEPLOY.md on upgrades).
const logSuffix = ":log2"

// Log returns the key of the log of identifier id under the rule k names.
func (k Keys) Log(id string) string { return k.Key(id, logSuffix) }

// Digest returns the 22-character form of id used inside keys.
func Digest(id string) string {
	sum := sha256.Sum256([]byte(id))
	return base64.RawURLEncoding.EncodeToString(sum[:16])
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
