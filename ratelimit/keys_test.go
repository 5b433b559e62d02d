package ratelimit_test

import (
	"strings"
	"testing"

	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/ratelimit"
)

// hashTag returns the part of key that Redis Cluster hashes: the text
// between the first '{' and the first '}' after it, if not empty.
func hashTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

// slot is Redis Cluster's key slot: CRC16 (XMODEM) of the hash tag mod 16384.
func slot(key string) uint16 {
	var crc uint16
	for _, b := range []byte(hashTag(key)) {
		crc ^= uint16(b) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}

func TestSlotMatchesRedis(t *testing.T) {
	// Values from the Redis Cluster specification and CLUSTER KEYSLOT.
	for key, want := range map[string]uint16{"123456789": 12739 % 16384, "foo": 12182, "{user1000}.following": 3443, "{user1000}.followers": 3443, "foo{}{bar}": 8363} {
		if got := slot(key); got != want {
			t.Errorf("slot(%q) = %d, want %d", key, got, want)
		}
	}
}

// FuzzKeys: whatever an identifier holds, every key of one identity carries
// one intact hash tag (so one slot), and two different identities never
// share a key.
func FuzzKeys(f *testing.F) {
	for _, s := range []string{"", "a@example.com", "{", "}", "{}", "a}b{c", "x:y", "\x00", "\xff\xfe", "{user}:seq", strings.Repeat("{", 300)} {
		f.Add(s, s+"x")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		for _, kind := range []string{"login_ip", "login_account", "lock"} {
			keys, err := ratelimit.NewKeys("xcloak:", kind)
			if err != nil {
				t.Fatal(err)
			}
			base := keys.Key(a, "")
			wantTag := kind + ":" + ratelimit.Digest(a)
			for _, suffix := range []string{"", ":failures", ":level", ":until"} {
				k := keys.Key(a, suffix)
				if tag := hashTag(k); tag != wantTag {
					t.Fatalf("key %q for %q: hash tag %q, want %q", k, a, tag, wantTag)
				}
				if slot(k) != slot(base) {
					t.Fatalf("key %q is in slot %d, its identity's base key %q in %d", k, slot(k), base, slot(base))
				}
				if strings.Count(k, "{") != 1 || strings.Count(k, "}") != 1 {
					t.Fatalf("key %q: identifier bytes leaked into the key", k)
				}
			}
			if a != b && keys.Key(a, "") == keys.Key(b, "") {
				t.Fatalf("identities %q and %q share key %q", a, b, base)
			}
		}
	})
}

func TestNewKeysRejectsBadNames(t *testing.T) {
	for _, tc := range []struct{ prefix, kind string }{
		{"x{", "login"}, {"x}", "login"}, {"x:", ""}, {"x:", "Login"}, {"x:", "a:b"}, {"x:", strings.Repeat("a", 33)},
	} {
		if _, err := ratelimit.NewKeys(tc.prefix, tc.kind); err == nil {
			t.Errorf("NewKeys(%q, %q): no error", tc.prefix, tc.kind)
		}
	}
}

// TestSlot checks the slot function against the Redis Cluster
// specification's CRC16 check value and against a live cluster's own
// answers (CLUSTER KEYSLOT), hash tags and odd braces included.
func TestSlot(t *testing.T) {
	if got := ratelimit.Slot("123456789"); got != 0x31C3 {
		t.Errorf("Slot(123456789) = %d, want the CRC16 check value %d", got, 0x31C3)
	}
	rdb, prefix := testenv.RedisCluster(t)
	k, _ := ratelimit.NewKeys(prefix, "login_ip")
	for _, key := range []string{"foo", "{user1000}.following", "foo{}{bar}", "foo{{bar}}zap", "foo{bar}{zap}", "{", "}{",
		k.Key("", ""), k.Key("ann@example.com", ":lock"), k.Key("192.0.2.0/24", "")} {
		want, err := rdb.ClusterKeySlot(t.Context(), key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := ratelimit.Slot(key); int64(got) != want {
			t.Errorf("Slot(%q) = %d, the cluster says %d", key, got, want)
		}
	}
}
