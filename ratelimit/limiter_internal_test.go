package ratelimit

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/internal/testenv"
)

// TestParseReplyShapes feeds parseReply replies a real Redis gives for
// scripts other than sliding_window.lua: every reply the script cannot
// give is an error, never an admission nor a panic; the script's own
// shapes read as its contract says.
func TestParseReplyShapes(t *testing.T) {
	rdb, _ := testenv.Redis(t)
	one := []Rule{{Name: "login_ip", ID: "x", Limit: PerMinute(5)}}
	two := []Rule{one[0], {Name: "login_account", ID: "y", Limit: PerMinute(5), Lockable: true}}
	for _, c := range []struct {
		name   string
		rules  []Rule
		script string
		// want is each rule's Allowed, Locked and RetryAfter in
		// microseconds; nil for an error.
		want []Result
	}{
		{"error reply", one, "return redis.error_reply('ERR boom')", nil},
		{"a number", one, "return 1", nil},
		{"nil", one, "return nil", nil},
		{"an array", one, "return {1, 3, 7}", nil},
		{"empty", one, "return ''", nil},
		{"short", one, "return struct.pack('<Bi4', 1, 3)", nil},
		{"long", one, "return struct.pack('<Bi4i8i4', 1, 3, 7, 9)", nil},
		{"one rule's answer for two", two, "return struct.pack('<Bi4i8', 1, 3, 7)", nil},
		{"rejected by no rule", one, "return struct.pack('<Bi4i8', 0, 3, 0)", nil},
		{"rejected by no rule of two", two, "return struct.pack('<Bi4i8i4i8', 0, 3, 0, 2, 0)", nil},
		{"neither admitted nor rejected", one, "return struct.pack('<Bi4i8', 2, 3, 7)", nil},
		{"a negative count", one, "return struct.pack('<Bi4i8', 0, -3, 7)", nil},
		{"admitted", one, "return struct.pack('<Bi4i8', 1, 3, 7)", []Result{{Allowed: true}}},
		{"rejected", one, "return struct.pack('<Bi4i8', 0, 5, 7)", []Result{{RetryAfter: 7}}},
		{"locked", one, "return struct.pack('<Bi4i8', 0, 2, -7)", []Result{{Locked: true, RetryAfter: 7}}},
		{"one of two rejects", two, "return struct.pack('<Bi4i8i4i8', 0, 3, 0, 2, -7)", []Result{{Allowed: true}, {Locked: true, RetryAfter: 7}}},
		{"a long wait", one, "return struct.pack('<Bi4i8', 0, 5, 2678400000000)", []Result{{RetryAfter: 2678400000000}}},
		{"a wait no Duration holds", one, "return struct.pack('<Bi4i8', 0, 5, 36028797018963968)", nil},
		{"a lock no Duration holds", one, "return struct.pack('<Bi4i8', 0, 5, -36028797018963968)", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := rdb.Eval(t.Context(), c.script, nil)
			results := make([]Result, len(c.rules))
			err := parseReply(c.rules, cmd, results, nil, nil)
			if c.want == nil {
				if err == nil {
					t.Fatalf("no error; results %+v", results)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, w := range c.want {
				got := results[i]
				if got.Allowed != w.Allowed || got.Locked != w.Locked || got.RetryAfter != w.RetryAfter*time.Microsecond {
					t.Errorf("rule %d: %+v, want allowed %v, locked %v, retry-after %v", i, got, w.Allowed, w.Locked, w.RetryAfter*time.Microsecond)
				}
			}
		})
	}
}

// TestScriptRejectsMalformedInput gives sliding_window.lua rules and keys
// that Limiter never sends: each is an error naming the input, and none
// writes anything (a script's writes before an error stay). A window of
// zero or less would otherwise admit without limit, one too long for the
// log's widths or header would be stored truncated, a key missing would
// fail only after earlier rules' logs were written, and a key too many (a
// lock the rules do not name) would be ignored.
func TestScriptRejectsMalformedInput(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	a, b, lock := prefix+"{a}:log3", prefix+"{a}:log3b", prefix+"{a}:lock"
	spec := func(rules ...[2]int64) []byte {
		var out []byte
		for _, r := range rules {
			out = binary.LittleEndian.AppendUint32(out, uint32(int32(r[0])))
			out = binary.LittleEndian.AppendUint64(out, uint64(r[1]))
		}
		return out
	}
	minute := time.Minute.Microseconds()
	for _, c := range []struct {
		name string
		keys []string
		spec []byte
	}{
		{"a window of 0", []string{a}, spec([2]int64{5, 0})},
		{"a negative window", []string{a}, spec([2]int64{5, -minute})},
		{"a window under a millisecond", []string{a}, spec([2]int64{5, 999})},
		{"a window too long for the log", []string{a}, spec([2]int64{5, 1 << 47})},
		{"a window of 0 in the second of two rules", []string{a, b}, spec([2]int64{5, minute}, [2]int64{5, 0})},
		{"a key missing", []string{a}, spec([2]int64{5, minute}, [2]int64{5, minute})},
		{"a lockable rule's lock missing", []string{a}, spec([2]int64{-5, minute})},
		{"a lock missing after another rule", []string{a, b}, spec([2]int64{5, minute}, [2]int64{-5, minute})},
		{"a key too many", []string{a, lock}, spec([2]int64{5, minute})},
		{"a key too many after two rules", []string{a, b, lock}, spec([2]int64{5, minute}, [2]int64{5, minute})},
		{"a part of a rule", []string{a}, spec([2]int64{5, minute})[:11]},
	} {
		t.Run(c.name, func(t *testing.T) {
			rdb.Del(t.Context(), a, b, lock)
			err := slidingWindow.run(t.Context(), rdb, c.keys, c.spec).Err()
			if err == nil || !strings.Contains(err.Error(), "ratelimit:") {
				t.Errorf("error %v, want the script's own", err)
			}
			if n := rdb.Exists(t.Context(), a, b, lock).Val(); n != 0 {
				t.Errorf("%d keys written", n)
			}
		})
	}
}

// TestSpecWindowNeverShorter: the script counts in microseconds. A window
// that is not a whole number of them (a limit written "5/1.0000005s") is
// given to it rounded up: cut to the microsecond below, a retry-after
// would come before the window's end, and two admissions a whole window
// of the script's apart would both count in one window of the rule's.
func TestSpecWindowNeverShorter(t *testing.T) {
	for _, c := range []struct {
		window time.Duration
		want   int64
	}{
		{time.Millisecond, 1000},
		{time.Millisecond + 1, 1001},
		{time.Second + 999, 1000001},
		{MaxWindow, MaxWindow.Microseconds()},
	} {
		spec := appendSpec(nil, Rule{Name: "login_ip", ID: "x", Limit: Limit{Count: 5, Window: c.window}})
		if got := int64(binary.LittleEndian.Uint64(spec[4:])); got != c.want {
			t.Errorf("window %v: the script is given %d µs, want %d", c.window, got, c.want)
		}
	}
}

// TestScriptRejectsMalformedPlaces gives sliding_window.lua places
// (Rule.Place) that Limiter never sends: each is an error, before
// anything is written. A place of a rule that has no lock would count
// towards nothing, one of a rule past the last would be read from
// outside the rules, and a threshold or ttl below 1 would refuse every
// attempt or hold a place forever.
func TestScriptRejectsMalformedPlaces(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	log, lock := prefix+"{a}:log3", prefix+"{a}:lock"
	failures, inflight, attempts := prefix+"{a}:failures", prefix+"{a}:inflight", prefix+"{a}:attempts"
	written := []string{log, lock, failures, inflight, attempts}
	minute := time.Minute.Microseconds()
	negative := int32(-5)
	lockable := binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint32(nil, uint32(negative)), uint64(minute))
	plain := binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint32(nil, 5), uint64(minute))
	place := func(rule, threshold int32, ttl int64) string {
		b := binary.LittleEndian.AppendUint32(nil, uint32(rule))
		b = binary.LittleEndian.AppendUint32(b, uint32(threshold))
		return string(binary.LittleEndian.AppendUint64(b, uint64(ttl)))
	}
	good := place(1, 3, 60000)
	for _, c := range []struct {
		name string
		keys []string
		args []any
	}{
		{"a place of a rule with no lock", []string{log, failures, inflight, attempts}, []any{plain, good, "token", ""}},
		{"a place of rule 0", []string{log, lock, failures, inflight, attempts}, []any{lockable, place(0, 3, 60000), "token", ""}},
		{"a place past the last rule", []string{log, lock, failures, inflight, attempts}, []any{lockable, place(2, 3, 60000), "token", ""}},
		{"a threshold of 0", []string{log, lock, failures, inflight, attempts}, []any{lockable, place(1, 0, 60000), "token", ""}},
		{"a ttl of 0", []string{log, lock, failures, inflight, attempts}, []any{lockable, place(1, 3, 0), "token", ""}},
		{"a place's keys missing", []string{log, lock, failures, inflight}, []any{lockable, good, "token", ""}},
		{"a place's token missing", []string{log, lock, failures, inflight, attempts}, []any{lockable, good, "token"}},
		{"a part of a place", []string{log, lock, failures, inflight, attempts}, []any{lockable, good[:15], "token", ""}},
		{"no place", []string{log, lock}, []any{lockable, ""}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rdb.Del(t.Context(), written...)
			err := slidingWindow.run(t.Context(), rdb, c.keys, c.args...).Err()
			if err == nil || !strings.Contains(err.Error(), "ratelimit:") {
				t.Errorf("error %v, want the script's own", err)
			}
			if n := rdb.Exists(t.Context(), written...).Val(); n != 0 {
				t.Errorf("%d keys written", n)
			}
		})
	}
}
