package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fast keeps most tests quick; the bounds still hold for it.
var fast = Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}

// Made with the reference implementation's CLI (argon2 <salt> -id -e ...),
// so the encoding is checked against something other than itself.
const (
	// echo -n "correct horse battery staple" | argon2 saltsaltsalt16b -id -t 1 -m 6 -p 1 -l 32 -e
	vectorFast = "$argon2id$v=19$m=64,t=1,p=1$c2FsdHNhbHRzYWx0MTZi$fX4U82met1J4au97EQgql0dI9PF/KdvrnN5CdMayO+A"
	// echo -n "password" | argon2 somesalt -id -t 2 -m 10 -p 2 -l 24 -e
	vectorTwoThreads = "$argon2id$v=19$m=1024,t=2,p=2$c29tZXNhbHQ$SXRPdBUYF/q82eTzDqzEkG0+sFSFPpb/"
)

func newHasher(t testing.TB, p Params, maxConcurrent int, maxWait time.Duration) *Hasher {
	t.Helper()
	h, err := NewHasher(p, maxConcurrent, maxWait)
	if err != nil {
		t.Fatalf("NewHasher(%+v): %v", p, err)
	}
	return h
}

// waitFor polls cond until it holds. The limit is only there so that a broken
// Hasher fails the test instead of hanging it; nothing is asserted about time.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// holdSlots takes every slot of h (which has n) with Hash calls that stay in
// their slot until the returned function is called.
func holdSlots(t *testing.T, h *Hasher, n int) (release func()) {
	t.Helper()
	gate := make(chan struct{})
	var entered atomic.Int64
	h.inSlot = func() {
		// Only the holders block, so a slot handed out beyond the bound
		// fails the test instead of hanging it.
		if entered.Add(1) <= int64(n) {
			<-gate
		}
	}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if _, err := h.Hash(context.Background(), "held"); err != nil {
				t.Errorf("holding Hash: %v", err)
			}
		})
	}
	waitFor(t, "slots to be held", func() bool { return h.Stats().Running == n })
	var once sync.Once
	release = func() {
		once.Do(func() {
			close(gate)
			wg.Wait()
		})
	}
	t.Cleanup(release)
	return release
}

func TestHashVerifyRoundTrip(t *testing.T) {
	h := newHasher(t, fast, 0, time.Second)
	ctx := context.Background()
	tests := []struct {
		name     string
		password string
	}{
		{"empty", ""},
		{"ascii", "correct horse battery staple"},
		{"unicode", "pässwörd 密码 🔑"},
		{"nul bytes", "a\x00b\x00"},
		{"max length", strings.Repeat("x", MaxPasswordBytes)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			encoded, err := h.Hash(ctx, tt.password)
			if err != nil {
				t.Fatalf("Hash: %v", err)
			}
			ok, rehash, err := h.Verify(ctx, encoded, tt.password)
			if err != nil || !ok || rehash {
				t.Errorf("Verify(right password) = %v, %v, %v; want true, false, nil", ok, rehash, err)
			}
			wrong := tt.password + "x"
			if len(wrong) > MaxPasswordBytes {
				wrong = tt.password[1:] + "y"
			}
			ok, rehash, err = h.Verify(ctx, encoded, wrong)
			if err != nil || ok || rehash {
				t.Errorf("Verify(wrong password) = %v, %v, %v; want false, false, nil", ok, rehash, err)
			}
		})
	}
}

func TestHashDefaultParams(t *testing.T) {
	h := newHasher(t, DefaultParams, 1, time.Second)
	ctx := context.Background()
	encoded, err := h.Hash(ctx, "hunter2")
	if err != nil {
		t.Fatalf("Hash: %v", err)
	}
	if want := "$argon2id$v=19$m=19456,t=2,p=1$"; !strings.HasPrefix(encoded, want) {
		t.Errorf("Hash = %q; want prefix %q", encoded, want)
	}
	p, salt, key, err := decodeHash(encoded)
	if err != nil {
		t.Fatalf("decodeHash(%q): %v", encoded, err)
	}
	if p != DefaultParams || len(salt) != 16 || len(key) != 32 {
		t.Errorf("decoded params %+v, salt %d bytes, key %d bytes; want %+v, 16, 32", p, len(salt), len(key), DefaultParams)
	}
	ok, rehash, err := h.Verify(ctx, encoded, "hunter2")
	if err != nil || !ok || rehash {
		t.Errorf("Verify = %v, %v, %v; want true, false, nil", ok, rehash, err)
	}
	ok, _, err = h.Verify(ctx, encoded, "hunter3")
	if err != nil || ok {
		t.Errorf("Verify(wrong password) = %v, %v; want false, nil", ok, err)
	}
}

func TestHashSaltsDiffer(t *testing.T) {
	h := newHasher(t, fast, 0, time.Second)
	a, errA := h.Hash(context.Background(), "same")
	b, errB := h.Hash(context.Background(), "same")
	if errA != nil || errB != nil {
		t.Fatalf("Hash: %v, %v", errA, errB)
	}
	if a == b {
		t.Errorf("two hashes of one password are both %q; want different salts", a)
	}
}

func TestVerifyReferenceVectors(t *testing.T) {
	h := newHasher(t, fast, 0, time.Second)
	tests := []struct {
		name       string
		encoded    string
		password   string
		wantOK     bool
		wantRehash bool
	}{
		{"same m,t,p but 15-byte salt", vectorFast, "correct horse battery staple", true, true},
		{"same m,t,p wrong password", vectorFast, "correct horse battery stapler", false, false},
		{"other params", vectorTwoThreads, "password", true, true},
		{"other params wrong password", vectorTwoThreads, "Password", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, rehash, err := h.Verify(context.Background(), tt.encoded, tt.password)
			if err != nil || ok != tt.wantOK || rehash != tt.wantRehash {
				t.Errorf("Verify = %v, %v, %v; want %v, %v, nil", ok, rehash, err, tt.wantOK, tt.wantRehash)
			}
		})
	}
}

func TestVerifyNeedsRehash(t *testing.T) {
	ctx := context.Background()
	current := newHasher(t, fast, 0, time.Second)
	tests := []struct {
		name   string
		old    Params
		rehash bool
	}{
		{"equal", fast, false},
		{"memory", Params{Memory: 128, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}, true},
		{"time", Params{Memory: 64, Time: 2, Threads: 1, SaltLen: 16, KeyLen: 32}, true},
		{"threads", Params{Memory: 64, Time: 1, Threads: 2, SaltLen: 16, KeyLen: 32}, true},
		{"salt length", Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 8, KeyLen: 32}, true},
		{"key length", Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 16}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			encoded, err := newHasher(t, tt.old, 0, time.Second).Hash(ctx, "pw")
			if err != nil {
				t.Fatalf("Hash: %v", err)
			}
			ok, rehash, err := current.Verify(ctx, encoded, "pw")
			if err != nil || !ok || rehash != tt.rehash {
				t.Errorf("Verify = %v, %v, %v; want true, %v, nil", ok, rehash, err, tt.rehash)
			}
			// A wrong password must never ask for a rehash: the caller
			// would store a hash of it.
			ok, rehash, err = current.Verify(ctx, encoded, "wrong")
			if err != nil || ok || rehash {
				t.Errorf("Verify(wrong password) = %v, %v, %v; want false, false, nil", ok, rehash, err)
			}
			// A password typed in another form than its normal one
			// (a decomposed accent) asks alike: it takes another path.
			encoded, err = newHasher(t, tt.old, 0, time.Second).Hash(ctx, "caf\u00e9")
			if err != nil {
				t.Fatalf("Hash: %v", err)
			}
			ok, rehash, err = current.Verify(ctx, encoded, "cafe\u0301")
			if err != nil || !ok || rehash != tt.rehash {
				t.Errorf("Verify(decomposed) = %v, %v, %v; want true, %v, nil", ok, rehash, err, tt.rehash)
			}
		})
	}
}

func TestPasswordTooLongRefusedBeforeSlot(t *testing.T) {
	// With the only slot held and no wait allowed, any call that reaches for
	// a slot gets ErrHasherBusy; a too-long password must be refused first.
	h := newHasher(t, fast, 1, 0)
	valid, err := h.Hash(context.Background(), "pw")
	if err != nil {
		t.Fatalf("Hash: %v", err)
	}
	holdSlots(t, h, 1)

	ops := []struct {
		name string
		call func(password string) error
	}{
		{"Hash", func(pw string) error { _, err := h.Hash(context.Background(), pw); return err }},
		{"Verify", func(pw string) error { _, _, err := h.Verify(context.Background(), valid, pw); return err }},
		{"VerifyUnknown", func(pw string) error { return h.VerifyUnknown(context.Background(), pw) }},
	}
	tests := []struct {
		length int
		want   error
	}{
		{MaxPasswordBytes + 1, ErrPasswordTooLong},
		{1 << 20, ErrPasswordTooLong},
		{MaxPasswordBytes, ErrHasherBusy}, // accepted, so it went for a slot
	}
	for _, op := range ops {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s %d bytes", op.name, tt.length), func(t *testing.T) {
				if err := op.call(strings.Repeat("p", tt.length)); !errors.Is(err, tt.want) {
					t.Errorf("%s(%d bytes) error = %v; want %v", op.name, tt.length, err, tt.want)
				}
			})
		}
	}
	if got := h.Stats().Waiting; got != 0 {
		t.Errorf("Stats().Waiting = %d; want 0", got)
	}
}

func TestVerifyMalformed(t *testing.T) {
	h := newHasher(t, fast, 0, time.Second)
	salt := "c2FsdHNhbHRzYWx0MTZi"
	key := "fX4U82met1J4au97EQgql0dI9PF/KdvrnN5CdMayO+A"
	phc := func(head, params, salt, key string) string {
		return head + "$" + params + "$" + salt + "$" + key
	}
	valid := phc("$argon2id$v=19", "m=64,t=1,p=1", salt, key)
	if valid != vectorFast {
		t.Fatalf("test setup: %q != %q", valid, vectorFast)
	}
	tests := []struct {
		name    string
		encoded string
	}{
		{"empty", ""},
		{"dollar", "$"},
		{"bcrypt", "$2a$10$N9qo8uLOickgx2ZMRZoMyeIjZAgcfl7p92ldGxad68LJZdL17lhWy"},
		{"plain text", "hunter2"},
		{"argon2i", phc("$argon2i$v=19", "m=64,t=1,p=1", salt, key)},
		{"argon2d", phc("$argon2d$v=19", "m=64,t=1,p=1", salt, key)},
		{"upper case algorithm", phc("$ARGON2ID$v=19", "m=64,t=1,p=1", salt, key)},
		{"no leading dollar", strings.TrimPrefix(valid, "$")},
		{"leading space", " " + valid},
		{"trailing dollar", valid + "$"},
		{"extra field", valid + "$AAAAAAAAAAA"},
		{"version 16", phc("$argon2id$v=16", "m=64,t=1,p=1", salt, key)},
		{"version with leading zero", phc("$argon2id$v=019", "m=64,t=1,p=1", salt, key)},
		{"version missing", "$argon2id$m=64,t=1,p=1$" + salt + "$" + key},
		{"two parameters", phc("$argon2id$v=19", "m=64,t=1", salt, key)},
		{"four parameters", phc("$argon2id$v=19", "m=64,t=1,p=1,k=1", salt, key)},
		{"parameters reordered", phc("$argon2id$v=19", "t=1,m=64,p=1", salt, key)},
		{"parameter spaces", phc("$argon2id$v=19", "m=64, t=1, p=1", salt, key)},
		{"parameter empty", phc("$argon2id$v=19", "m=,t=1,p=1", salt, key)},
		{"parameter leading zero", phc("$argon2id$v=19", "m=064,t=1,p=1", salt, key)},
		{"parameter plus sign", phc("$argon2id$v=19", "m=+64,t=1,p=1", salt, key)},
		{"parameter negative", phc("$argon2id$v=19", "m=-64,t=1,p=1", salt, key)},
		{"parameter hex", phc("$argon2id$v=19", "m=0x40,t=1,p=1", salt, key)},
		{"parameter underscore", phc("$argon2id$v=19", "m=6_4,t=1,p=1", salt, key)},
		{"memory overflows uint32", phc("$argon2id$v=19", "m=4294967360,t=1,p=1", salt, key)},
		{"memory 2 GiB", phc("$argon2id$v=19", "m=2097152,t=1,p=1", salt, key)},
		{"memory max uint32", phc("$argon2id$v=19", "m=4294967295,t=1,p=1", salt, key)},
		{"memory below 8 KiB per thread", phc("$argon2id$v=19", "m=15,t=1,p=2", salt, key)},
		{"memory zero", phc("$argon2id$v=19", "m=0,t=1,p=1", salt, key)},
		{"time zero", phc("$argon2id$v=19", "m=64,t=0,p=1", salt, key)},
		{"time 101", phc("$argon2id$v=19", "m=64,t=101,p=1", salt, key)},
		{"time max uint32", phc("$argon2id$v=19", "m=64,t=4294967295,p=1", salt, key)},
		{"threads zero", phc("$argon2id$v=19", "m=64,t=1,p=0", salt, key)},
		{"threads 256", phc("$argon2id$v=19", "m=4096,t=1,p=256", salt, key)},
		{"salt empty", phc("$argon2id$v=19", "m=64,t=1,p=1", "", key)},
		{"salt 7 bytes", phc("$argon2id$v=19", "m=64,t=1,p=1", b64.EncodeToString(make([]byte, 7)), key)},
		{"salt 1025 bytes", phc("$argon2id$v=19", "m=64,t=1,p=1", b64.EncodeToString(make([]byte, 1025)), key)},
		{"salt padded", phc("$argon2id$v=19", "m=64,t=1,p=1", "c29tZXNhbHQ=", key)},
		{"salt url alphabet", phc("$argon2id$v=19", "m=64,t=1,p=1", "c2FsdHNhbHRzYWx0MTZ-", key)},
		{"salt stray bits", phc("$argon2id$v=19", "m=64,t=1,p=1", "c29tZXNhbHR", key)},
		{"salt impossible length", phc("$argon2id$v=19", "m=64,t=1,p=1", "c2FsdHNhbHRzYWx0MTZiA", key)},
		{"key empty", phc("$argon2id$v=19", "m=64,t=1,p=1", salt, "")},
		{"key 7 bytes", phc("$argon2id$v=19", "m=64,t=1,p=1", salt, b64.EncodeToString(make([]byte, 7)))},
		{"key 1025 bytes", phc("$argon2id$v=19", "m=64,t=1,p=1", salt, b64.EncodeToString(make([]byte, 1025)))},
		{"key with line feed", phc("$argon2id$v=19", "m=64,t=1,p=1", salt, key[:20]+"\n"+key[20:])},
		{"key with carriage return", phc("$argon2id$v=19", "m=64,t=1,p=1", salt, key[:20]+"\r"+key[20:])},
		{"key with space", phc("$argon2id$v=19", "m=64,t=1,p=1", salt, key[:20]+" "+key[20:])},
		{"trailing line feed", valid + "\n"},
		{"huge", valid + strings.Repeat("A", 1<<20)},
		{"invalid utf-8", phc("$argon2id$v=19", "m=64,t=1,p=1", salt, "\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8\xf7\xf6\xf5")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, rehash, err := h.Verify(context.Background(), tt.encoded, "correct horse battery staple")
			if !errors.Is(err, ErrMalformedHash) || ok || rehash {
				t.Errorf("Verify = %v, %v, %v; want false, false, ErrMalformedHash", ok, rehash, err)
			}
		})
	}
}

func TestVerifyUnknown(t *testing.T) {
	h := newHasher(t, fast, 0, time.Second)
	p, _, _, err := decodeHash(h.dummy)
	if err != nil || p != fast {
		t.Fatalf("dummy hash decodes to %+v, %v; want %+v, nil (same work as a current hash)", p, err, fast)
	}
	var slots atomic.Int64
	h.inSlot = func() { slots.Add(1) }
	for _, pw := range []string{"", "pw", strings.Repeat("x", MaxPasswordBytes)} {
		if err := h.VerifyUnknown(context.Background(), pw); err != nil {
			t.Errorf("VerifyUnknown(%d bytes) = %v; want nil", len(pw), err)
		}
	}
	if got := slots.Load(); got != 3 {
		t.Errorf("VerifyUnknown took %d slots in 3 calls; want 3 (one hash each)", got)
	}
}

func TestNewHasherRejectsBadParams(t *testing.T) {
	tests := []struct {
		name string
		p    Params
	}{
		{"zero", Params{}},
		{"memory too small", Params{Memory: 7, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}},
		{"memory too small for threads", Params{Memory: 31, Time: 1, Threads: 4, SaltLen: 16, KeyLen: 32}},
		{"memory over 1 GiB", Params{Memory: 1<<20 + 1, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}},
		{"time zero", Params{Memory: 64, Time: 0, Threads: 1, SaltLen: 16, KeyLen: 32}},
		{"time 101", Params{Memory: 64, Time: 101, Threads: 1, SaltLen: 16, KeyLen: 32}},
		{"threads zero", Params{Memory: 64, Time: 1, Threads: 0, SaltLen: 16, KeyLen: 32}},
		{"salt 7 bytes", Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 7, KeyLen: 32}},
		{"salt 1025 bytes", Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 1025, KeyLen: 32}},
		{"key 7 bytes", Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 7}},
		{"key 1025 bytes", Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 1025}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if h, err := NewHasher(tt.p, 1, time.Second); err == nil {
				t.Errorf("NewHasher(%+v) = %v, nil; want an error", tt.p, h)
			}
		})
	}
}

func TestHasherBoundsConcurrency(t *testing.T) {
	const bound, callers = 2, 10
	h := newHasher(t, fast, bound, time.Minute)
	var inside, peak atomic.Int64
	gate := make(chan struct{})
	h.inSlot = func() {
		n := inside.Add(1)
		defer inside.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		if r := h.Stats().Running; r > bound {
			t.Errorf("Stats().Running = %d inside a slot; want at most %d", r, bound)
		}
		<-gate
	}
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			if _, err := h.Hash(context.Background(), "pw"); err != nil {
				t.Errorf("Hash: %v", err)
			}
		})
	}
	// Every caller ends up either in a slot or queued; a caller let in
	// beyond the bound shows in peak.
	waitFor(t, "the bound to fill and the rest to queue", func() bool {
		s := h.Stats()
		return s.Running == bound && s.Waiting == callers-bound || peak.Load() > bound
	})
	close(gate)
	wg.Wait()
	if got := peak.Load(); got != bound {
		t.Errorf("peak concurrent hashes = %d; want %d", got, bound)
	}
	if got := h.Stats(); got != (HasherStats{}) {
		t.Errorf("Stats() after all calls = %+v; want zero", got)
	}
}

func TestHasherBusy(t *testing.T) {
	for _, wait := range []time.Duration{0, time.Millisecond} {
		h := newHasher(t, fast, 1, wait)
		valid, err := h.Hash(context.Background(), "pw")
		if err != nil {
			t.Fatalf("Hash: %v", err)
		}
		release := holdSlots(t, h, 1)
		t.Run("wait "+wait.String(), func(t *testing.T) {
			if _, err := h.Hash(context.Background(), "pw"); !errors.Is(err, ErrHasherBusy) {
				t.Errorf("Hash error = %v; want ErrHasherBusy", err)
			}
			if _, _, err := h.Verify(context.Background(), valid, "pw"); !errors.Is(err, ErrHasherBusy) {
				t.Errorf("Verify error = %v; want ErrHasherBusy", err)
			}
			if err := h.VerifyUnknown(context.Background(), "pw"); !errors.Is(err, ErrHasherBusy) {
				t.Errorf("VerifyUnknown error = %v; want ErrHasherBusy", err)
			}
			if got := h.Stats(); got != (HasherStats{Running: 1}) {
				t.Errorf("Stats() = %+v; want {Running:1 Waiting:0}", got)
			}
			release()
			if _, err := h.Hash(context.Background(), "pw"); err != nil {
				t.Errorf("Hash after the slot was freed: %v", err)
			}
		})
	}
}

func TestHasherContextCanceled(t *testing.T) {
	h := newHasher(t, fast, 1, time.Hour)
	holdSlots(t, h, 1)

	t.Run("while waiting", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		errc := make(chan error, 1)
		go func() {
			_, err := h.Hash(ctx, "pw")
			errc <- err
		}()
		waitFor(t, "the caller to queue", func() bool { return h.Stats().Waiting == 1 })
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("Hash error = %v; want context.Canceled", err)
		}
		if got := h.Stats().Waiting; got != 0 {
			t.Errorf("Stats().Waiting after cancel = %d; want 0", got)
		}
	})
	t.Run("before the call", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, _, err := h.Verify(ctx, vectorFast, "pw"); !errors.Is(err, context.Canceled) {
			t.Errorf("Verify error = %v; want context.Canceled", err)
		}
	})
}

func FuzzVerifyEncoded(f *testing.F) {
	h := newHasher(f, fast, 0, time.Second)
	for _, seed := range []string{
		vectorFast,
		vectorTwoThreads,
		"",
		"$argon2id$v=19$m=19456,t=2,p=1$AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
		"$argon2id$v=19$m=64,t=1,p=1$$",
		"$argon2id$v=19$m=4294967295,t=4294967295,p=255$c29tZXNhbHQ$c29tZXNhbHQ",
		"$argon2i$v=19$m=65536,t=2,p=4$c29tZXNhbHQ$RdescudvJCsgt3ub+b+dWRWJTmaaJObG",
		"$argon2id$v=19$m=64,t=1,p=1$c29tZXNhbHQ=$c29tZXNhbHQ=",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, encoded string) {
		p, salt, key, err := decodeHash(encoded)
		if err != nil {
			if !errors.Is(err, ErrMalformedHash) {
				t.Fatalf("decodeHash error = %v; want ErrMalformedHash", err)
			}
			if _, _, err := h.Verify(context.Background(), encoded, "pw"); !errors.Is(err, ErrMalformedHash) {
				t.Fatalf("Verify error = %v; want ErrMalformedHash", err)
			}
			return
		}
		if err := p.validate(); err != nil {
			t.Fatalf("decodeHash accepted params %+v outside the bounds: %v", p, err)
		}
		// Strict parsing means one spelling per hash.
		if again := encodeHash(p, salt, key); again != encoded {
			t.Fatalf("decodeHash accepted %q, which encodes back as %q", encoded, again)
		}
		if p.Memory > 1024 || p.Time > 4 {
			return // valid but too costly to hash on every fuzz input
		}
		if _, _, err := h.Verify(context.Background(), encoded, "pw"); err != nil {
			t.Fatalf("Verify(%q): %v", encoded, err)
		}
	})
}

func BenchmarkHashDefault(b *testing.B) {
	h := newHasher(b, DefaultParams, 1, time.Minute)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.Hash(ctx, "correct horse battery staple"); err != nil {
			b.Fatal(err)
		}
	}
}

// TestVerifyTrustedHasAReservedSlot: with every shared slot held by other
// sign-ins, a trusted device's sign-in still gets one slot, and only one.
func TestVerifyTrustedHasAReservedSlot(t *testing.T) {
	h := newHasher(t, fast, 2, time.Millisecond)
	valid, err := h.Hash(context.Background(), "pw")
	if err != nil {
		t.Fatal(err)
	}
	holdSlots(t, h, 2)
	if _, _, err := h.Verify(context.Background(), valid, "pw"); !errors.Is(err, ErrHasherBusy) {
		t.Fatalf("Verify with the shared slots held: %v; want ErrHasherBusy", err)
	}
	// holdSlots blocks only the first two callers inside a slot; this one
	// passes through the reserved slot.
	ok, _, err := h.VerifyTrusted(context.Background(), valid, "pw")
	if err != nil || !ok {
		t.Fatalf("VerifyTrusted with the shared slots held: %v, %v; want the reserved slot", ok, err)
	}
	// Hold the reserved slot too: a second trusted sign-in must wait like
	// everyone else.
	gate := make(chan struct{})
	h.inSlot = func() { <-gate }
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.VerifyTrusted(context.Background(), valid, "pw")
	}()
	waitFor(t, "the reserved slot to be held", func() bool { return h.Stats().Running == 3 })
	if _, _, err := h.VerifyTrusted(context.Background(), valid, "pw"); !errors.Is(err, ErrHasherBusy) {
		t.Fatalf("second trusted sign-in with every slot held: %v; want ErrHasherBusy", err)
	}
	close(gate)
	<-done
}

// TestPasswordsAreNormalised: a password typed in another Unicode
// normalisation form matches, and a hash stored before normalisation (of
// the password as typed) still works and asks to be stored again.
func TestPasswordsAreNormalised(t *testing.T) {
	ctx := context.Background()
	h := newHasher(t, fast, 0, time.Second)
	composed, decomposed, fullWidth := "caf\u00e9 au lait", "cafe\u0301 au lait", "\uff43\uff41\uff46\u00e9 au lait"
	encoded, err := h.Hash(ctx, composed)
	if err != nil {
		t.Fatal(err)
	}
	for _, typed := range []string{composed, decomposed, fullWidth} {
		if ok, rehash, err := h.Verify(ctx, encoded, typed); err != nil || !ok || rehash {
			t.Errorf("Verify(%q) = %v, %v, %v; want true, false, nil", typed, ok, rehash, err)
		}
	}
	if ok, _, _ := h.Verify(ctx, encoded, "cafe au lait"); ok {
		t.Error("a password without the accent matched")
	}

	legacy, err := h.hash([]byte(decomposed)) // as stored before normalisation
	if err != nil {
		t.Fatal(err)
	}
	if ok, rehash, err := h.Verify(ctx, legacy, decomposed); err != nil || !ok || !rehash {
		t.Errorf("legacy hash, password as typed then: %v, %v, %v; want true, true (store it again), nil", ok, rehash, err)
	}
	if ok, rehash, err := h.Verify(ctx, legacy, "wrong"); err != nil || ok || rehash {
		t.Errorf("legacy hash, wrong password: %v, %v, %v; want false, false, nil", ok, rehash, err)
	}
}
