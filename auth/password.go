package auth

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/argon2"
	"golang.org/x/text/unicode/norm"
)

// Params are argon2id cost parameters.
type Params struct {
	// Memory is the memory cost in KiB.
	Memory uint32
	// Time is the number of passes over the memory.
	Time uint32
	// Threads is the degree of parallelism.
	Threads uint8
	// SaltLen is the length in bytes of the random salt made for each hash.
	SaltLen uint32
	// KeyLen is the length in bytes of the derived key that is stored.
	KeyLen uint32
}

// DefaultParams are OWASP's recommended argon2id parameters: 19 MiB of memory,
// two passes, one thread.
var DefaultParams = Params{Memory: 19 * 1024, Time: 2, Threads: 1, SaltLen: 16, KeyLen: 32}

// MaxPasswordBytes is the longest password, in bytes, that is hashed. Longer
// ones are refused before any work is done, so they cannot be used to make
// hashing more expensive.
const MaxPasswordBytes = 1024

var (
	// ErrPasswordTooLong is returned for a password longer than MaxPasswordBytes.
	ErrPasswordTooLong = fmt.Errorf("auth: password longer than %d bytes", MaxPasswordBytes)
	// ErrHasherBusy is returned when every hashing slot stayed taken for the
	// whole wait a Hasher allows; the server is overloaded and the request
	// should be retried later.
	ErrHasherBusy = errors.New("auth: too many password hashes in progress")
	// ErrMalformedHash is returned when a stored hash is not a valid argon2id
	// PHC string or names parameters outside the accepted bounds.
	ErrMalformedHash = errors.New("auth: malformed password hash")
)

// Bounds on parameters, both for a Hasher's own and for those read back from a
// stored hash: a tampered row must not make the server allocate gigabytes or
// spin for minutes.
const (
	maxMemoryKiB = 1 << 20 // 1 GiB
	maxTime      = 100
	minByteLen   = 8
	maxByteLen   = 1024
	// The longest PHC string the bounds allow is well under this; anything
	// longer is refused before it is split.
	maxEncodedLen = 4096
)

func (p Params) validate() error {
	switch {
	case p.Time < 1 || p.Time > maxTime:
		return fmt.Errorf("time %d outside 1..%d", p.Time, maxTime)
	case p.Threads < 1:
		return errors.New("threads must be at least 1")
	case p.Memory < 8*uint32(p.Threads) || p.Memory > maxMemoryKiB:
		// Argon2 needs at least 8 KiB per thread (RFC 9106, section 3.1).
		return fmt.Errorf("memory %d KiB outside %d..%d", p.Memory, 8*uint32(p.Threads), maxMemoryKiB)
	case p.SaltLen < minByteLen || p.SaltLen > maxByteLen:
		return fmt.Errorf("salt length %d outside %d..%d", p.SaltLen, minByteLen, maxByteLen)
	case p.KeyLen < minByteLen || p.KeyLen > maxByteLen:
		return fmt.Errorf("key length %d outside %d..%d", p.KeyLen, minByteLen, maxByteLen)
	}
	return nil
}

// HasherStats is a snapshot of a Hasher's load, for metrics.
type HasherStats struct {
	// Running is the number of hashes being computed now.
	Running int
	// Waiting is the number of callers waiting for a slot.
	Waiting int
	// GivingWay is the number of rejected sign-ins waiting for the
	// password checks in flight to finish (GiveWay).
	GivingWay int
	// HashesGivingWay is the number of hashes waiting, before they take a
	// slot or holding one, for the returning browsers' sign-ins in flight
	// (giveway.go).
	HashesGivingWay int
}

// Hasher hashes and verifies passwords with argon2id. Each hash takes
// Params.Memory KiB, so the number computed at once is bounded; callers
// beyond the bound wait briefly and then get ErrHasherBusy.
// A Hasher is safe for concurrent use.
type Hasher struct {
	params Params
	slots  chan struct{}
	// reserved is a slot only VerifyTrusted may take, so that a browser
	// that signed in before is not queued behind a flood of attempts that
	// passed the limits (credential stuffing admits up to the account limit
	// for every account it tries).
	reserved chan struct{}
	maxWait  time.Duration
	dummy    string // hash of a random secret, verified against for unknown accounts

	running atomic.Int64
	waiting atomic.Int64
	// checks are the password checks in flight, for GiveWay: every hash
	// while it runs, and every sign-in from the moment it is admitted (or
	// known to come from a returning browser) until it is answered
	// (Service.login).
	checks inFlight
	// trusted are the hashes of VerifyTrusted and hashTrusted in flight,
	// and the returning browsers' sign-ins around them, which the other
	// hashes give way to (giveway.go).
	trusted inFlight

	// inSlot, when set, runs while a slot is held, before hashing; tests use
	// it to hold slots and watch the bound.
	inSlot func()
	// derived, when set, runs after each key the Hasher derives; tests
	// count hashes with it.
	derived func()
}

// DefaultHashConcurrency is the hashes a Hasher computes at once unless
// told otherwise: one fewer than the cores Go runs on, at least one, so
// that with the slot reserved for the returning browsers' sign-ins there
// are as many hashes at once as cores. argon2id is memory-hard: a third
// hash on two cores slows each of them by far more than a third, and a
// flood's admitted attempts, which queue for every ordinary slot at once,
// would then leave the returning user's hash no core of its own
// (docs/BENCHMARKS.md, "A legitimate user during a flood").
func DefaultHashConcurrency() int { return max(1, runtime.GOMAXPROCS(0)-1) }

// NewHasher returns a Hasher that hashes with p. At most maxConcurrent hashes
// run at once (maxConcurrent <= 0 means DefaultHashConcurrency()), plus one
// reserved for VerifyTrusted; a caller waits
// at most maxWait for a slot (maxWait <= 0 means not at all), then gets
// ErrHasherBusy. It computes one hash up front, so that VerifyUnknown has a
// real hash with p to verify against. It fails if p is outside the accepted
// bounds.
func NewHasher(p Params, maxConcurrent int, maxWait time.Duration) (*Hasher, error) {
	if err := p.validate(); err != nil {
		return nil, fmt.Errorf("auth: invalid argon2id parameters: %w", err)
	}
	if maxConcurrent <= 0 {
		maxConcurrent = DefaultHashConcurrency()
	}
	h := &Hasher{
		params:   p,
		slots:    make(chan struct{}, maxConcurrent),
		reserved: make(chan struct{}, 1),
		maxWait:  max(maxWait, 0),
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, fmt.Errorf("auth: making dummy password: %w", err)
	}
	dummy, err := h.hash(secret)
	if err != nil {
		return nil, err
	}
	h.dummy = dummy
	return h, nil
}

// Hash returns password hashed with the Hasher's Params with a fresh random
// salt, as a PHC string: $argon2id$v=19$m=<KiB>,t=<time>,p=<threads>$<salt>$<key>.
// It returns ErrPasswordTooLong, ErrHasherBusy, or ctx.Err() if ctx ends
// while waiting for a slot.
func (h *Hasher) Hash(ctx context.Context, password string) (string, error) {
	return h.hashPassword(ctx, password, false)
}

// hashTrusted is Hash for a returning browser's sign-in (a valid device
// cookie of a known device) rehashing its password: like VerifyTrusted it
// may take the reserved slot, and it does not give way to the returning
// browsers' sign-ins in flight, its own among them (giveway.go).
func (h *Hasher) hashTrusted(ctx context.Context, password string) (string, error) {
	return h.hashPassword(ctx, password, true)
}

func (h *Hasher) hashPassword(ctx context.Context, password string, trusted bool) (string, error) {
	if len(password) > MaxPasswordBytes {
		return "", ErrPasswordTooLong
	}
	release, err := h.acquire(ctx, trusted)
	if err != nil {
		return "", err
	}
	defer release()
	return h.hash([]byte(normalisePassword(password)))
}

// normalisePassword returns password in Unicode normalisation form NFKC,
// as NIST SP 800-63B suggests, so that a password typed the same way on
// another keyboard or system ("é" as one code point or as "e" and a
// combining accent, full-width letters) matches. Hash stores the NFKC form
// and Verify compares it.
func normalisePassword(password string) string {
	return norm.NFKC.String(password)
}

func (h *Hasher) hash(password []byte) (string, error) {
	salt := make([]byte, h.params.SaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("auth: making salt: %w", err)
	}
	key := h.derive(password, salt, h.params)
	return encodeHash(h.params, salt, key), nil
}

// Verify reports whether password matches encoded, a PHC string made by Hash
// with any accepted Params; the keys are compared in constant time.
// needsRehash is true when ok is true and encoded was made with other Params
// than the Hasher's, so the caller should store a fresh Hash of password.
// It returns ErrPasswordTooLong, ErrMalformedHash (wrapped), ErrHasherBusy, or
// ctx.Err() if ctx ends while waiting for a slot.
func (h *Hasher) Verify(ctx context.Context, encoded, password string) (ok, needsRehash bool, err error) {
	return h.verify(ctx, encoded, password, false)
}

// VerifyTrusted is Verify for a sign-in from a browser that signed in to
// the account before (a valid device cookie): it may also take the slot
// reserved for such sign-ins, so a flood of other attempts cannot queue it
// out.
func (h *Hasher) VerifyTrusted(ctx context.Context, encoded, password string) (ok, needsRehash bool, err error) {
	return h.verify(ctx, encoded, password, true)
}

func (h *Hasher) verify(ctx context.Context, encoded, password string, trusted bool) (ok, needsRehash bool, err error) {
	if len(password) > MaxPasswordBytes {
		return false, false, ErrPasswordTooLong
	}
	p, salt, key, err := decodeHash(encoded)
	if err != nil {
		return false, false, err
	}
	release, err := h.acquire(ctx, trusted)
	if err != nil {
		return false, false, err
	}
	defer release()
	normalised := normalisePassword(password)
	ok = h.matches(normalised, p, salt, key)
	if normalised == password {
		return ok, ok && p != h.params, nil
	}
	// Hashes stored before passwords were normalised hold the password as
	// it was typed. Such a password matches as typed and is then stored
	// again, normalised. The second hash runs whether the first matched
	// or not: how many run depends only on the password typed, never on
	// whether it is right or the account exists, so the time of an answer
	// that reads the same either way (a held sign-in) tells nothing.
	typed := h.matches(password, p, salt, key)
	switch {
	case ok:
		return true, p != h.params, nil
	case typed:
		return true, true, nil
	}
	return false, false, nil
}

// derive returns the key of password with salt under p.
func (h *Hasher) derive(password, salt []byte, p Params) []byte {
	key := argon2.IDKey(password, salt, p.Time, p.Memory, p.Threads, p.KeyLen)
	if h.derived != nil {
		h.derived()
	}
	return key
}

func (h *Hasher) matches(password string, p Params, salt, key []byte) bool {
	got := h.derive([]byte(password), salt, p)
	return subtle.ConstantTimeCompare(got, key) == 1
}

// VerifyUnknown spends the same work as Verify against a hash made with the
// Hasher's Params, and the same errors, but never succeeds: it is used for
// accounts that do not exist, so that timing does not reveal which do.
func (h *Hasher) VerifyUnknown(ctx context.Context, password string) error {
	_, _, err := h.Verify(ctx, h.dummy, password)
	return err
}

// Stats returns the Hasher's current load.
func (h *Hasher) Stats() HasherStats {
	return HasherStats{Running: int(h.running.Load()), Waiting: int(h.waiting.Load()),
		GivingWay: int(h.checks.waiting.Load()), HashesGivingWay: int(h.trusted.waiting.Load())}
}

// GiveWay waits until no password check is in flight in this process
// (no hash running, no sign-in past its limits unanswered), at most limit
// and no longer than ctx lasts; with none in flight it returns at once,
// after one atomic load, allocating nothing. A rejected sign-in calls it
// before it is answered (giveway.go).
func (h *Hasher) GiveWay(ctx context.Context, limit time.Duration) {
	h.checks.wait(ctx, limit)
}

// checkStarted marks a password check in flight beyond its hash: a
// sign-in's, from its admission to its answer. checkEnded ends it.
func (h *Hasher) checkStarted() { h.checks.start() }
func (h *Hasher) checkEnded()   { h.checks.end() }

// returningStarted marks a returning browser's sign-in in flight, from
// its device cookie's check to its answer, or until its device is found
// not known: the other hashes give way to it as to VerifyTrusted's own
// (giveway.go). returningEnded ends it.
func (h *Hasher) returningStarted() { h.trusted.start() }
func (h *Hasher) returningEnded()   { h.trusted.end() }

// acquire takes a hashing slot, waiting at most h.maxWait, and returns the
// function that gives it back. A trusted caller may take the reserved slot
// too.
func (h *Hasher) acquire(ctx context.Context, trusted bool) (release func(), err error) {
	// A returning browser's hash first (giveway.go): an untrusted hash
	// gives way, hashGiveWay at most in all, before it queues for a slot,
	// and again once it has one should a returning sign-in have begun
	// while it queued: a flood's admitted attempts queue for the slots
	// all at once, at the attack's start, and would otherwise start one
	// by one beside the returning user's hash. It keeps its slot while it
	// waits (a waiting hash takes no core, and so it keeps its turn and
	// its bound on waiting for a slot), and only the time spent giving
	// way counts, not the time queued.
	giveWay := hashGiveWay
	if !trusted {
		giveWay -= h.trusted.wait(ctx, giveWay)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	held, err := h.take(ctx, trusted)
	if err != nil {
		return nil, err
	}
	for !trusted && giveWay > 0 && h.trusted.n.Load() > 0 {
		waited := h.trusted.wait(ctx, giveWay)
		if waited == 0 {
			break // the sign-in ended meanwhile
		}
		giveWay -= waited
	}
	if err := ctx.Err(); err != nil {
		<-held
		return nil, err
	}
	h.running.Add(1)
	h.checks.start()
	if trusted {
		h.trusted.start()
	}
	if h.inSlot != nil {
		h.inSlot()
	}
	return func() {
		if trusted {
			h.trusted.end()
		}
		h.checks.end()
		h.running.Add(-1)
		<-held
	}, nil
}

// take takes a hashing slot, the reserved one too for a trusted caller,
// waiting at most h.maxWait.
func (h *Hasher) take(ctx context.Context, trusted bool) (chan struct{}, error) {
	var reserved chan struct{} // nil: a select never picks it
	if trusted {
		reserved = h.reserved
	}
	select {
	case h.slots <- struct{}{}:
		return h.slots, nil
	case reserved <- struct{}{}:
		return reserved, nil
	default:
		return h.wait(ctx, reserved)
	}
}

func (h *Hasher) wait(ctx context.Context, reserved chan struct{}) (chan struct{}, error) {
	if h.maxWait <= 0 {
		return nil, ErrHasherBusy
	}
	h.waiting.Add(1)
	defer h.waiting.Add(-1)
	timer := time.NewTimer(h.maxWait)
	defer timer.Stop()
	select {
	case h.slots <- struct{}{}:
		return h.slots, nil
	case reserved <- struct{}{}:
		return reserved, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-timer.C:
		return nil, ErrHasherBusy
	}
}

var b64 = base64.RawStdEncoding.Strict()

func encodeHash(p Params, salt, key []byte) string {
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, p.Memory, p.Time, p.Threads, b64.EncodeToString(salt), b64.EncodeToString(key))
}

// decodeHash parses a PHC string strictly: only the form encodeHash writes is
// accepted, so each hash has exactly one spelling. The Params it returns have
// SaltLen and KeyLen set from the decoded salt and key.
func decodeHash(encoded string) (p Params, salt, key []byte, err error) {
	malformed := func(reason string) (Params, []byte, []byte, error) {
		return Params{}, nil, nil, fmt.Errorf("%w: %s", ErrMalformedHash, reason)
	}
	if len(encoded) > maxEncodedLen {
		return malformed("too long")
	}
	// The base64 decoder skips CR and LF; refuse them so they cannot hide
	// inside an otherwise valid string.
	if strings.ContainsAny(encoded, "\r\n") {
		return malformed("contains a line break")
	}
	fields := strings.Split(encoded, "$")
	if len(fields) != 6 || fields[0] != "" {
		return malformed("not of the form $argon2id$v=19$m=..,t=..,p=..$salt$key")
	}
	if fields[1] != "argon2id" {
		return malformed("algorithm is not argon2id")
	}
	if fields[2] != "v="+strconv.Itoa(argon2.Version) {
		return malformed("version is not 19")
	}
	params := strings.Split(fields[3], ",")
	if len(params) != 3 {
		return malformed("parameters are not m=..,t=..,p=..")
	}
	m, ok1 := parseParam(params[0], "m=", 32)
	t, ok2 := parseParam(params[1], "t=", 32)
	threads, ok3 := parseParam(params[2], "p=", 8)
	if !ok1 || !ok2 || !ok3 {
		return malformed("parameters are not m=..,t=..,p=.. in decimal")
	}
	if salt, err = b64.DecodeString(fields[4]); err != nil {
		return malformed("salt is not unpadded base64")
	}
	if key, err = b64.DecodeString(fields[5]); err != nil {
		return malformed("key is not unpadded base64")
	}
	p = Params{
		Memory:  uint32(m),
		Time:    uint32(t),
		Threads: uint8(threads),
		SaltLen: uint32(len(salt)),
		KeyLen:  uint32(len(key)),
	}
	if err := p.validate(); err != nil {
		return malformed(err.Error())
	}
	return p, salt, key, nil
}

// parseParam parses "<name><decimal>" where the decimal fits in bits and is
// written without sign or leading zeros.
func parseParam(s, name string, bits int) (uint64, bool) {
	digits, found := strings.CutPrefix(s, name)
	if !found {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, bits)
	if err != nil || strconv.FormatUint(n, 10) != digits {
		return 0, false
	}
	return n, true
}
