package auth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"sync"
	"sync/atomic"
	"time"
)

// A session token is 256 random bits and a 128-bit tag of them under a
// key derived from the service secret, in unpadded base64url: 64
// characters. The tag lets every replica refuse a cookie it did not make
// before it costs a query, so that a flood of made-up cookies at the
// pages, at forward-auth or at sign-out costs Postgres nothing. Only the
// SHA-256 of the whole token is stored, as before.
//
// Tokens made before they were tagged are 43 characters of random bits
// alone; their sessions last their time (legacySessions).
const (
	sessionTokenLen   = 64
	sessionRandomLen  = 32
	sessionTagLen     = 16
	legacyTokenLen    = 43
	legacyRecheckTime = time.Minute
	// legacyRetryTime is how long a failed recheck's last answer stands,
	// and legacyAskTimeout how long a recheck waits for the store.
	legacyRetryTime  = 5 * time.Second
	legacyAskTimeout = 2 * time.Second
)

// sessionTokens makes and checks the tags of session tokens.
type sessionTokens struct {
	key []byte
	// macs holds keyed hashes reused from one check to the next: every
	// forward-auth miss and every page checks one.
	macs *sync.Pool
}

func newSessionTokens(secret []byte) sessionTokens {
	key := deriveKey(secret, "session-token")
	return sessionTokens{key: key, macs: &sync.Pool{New: func() any { return hmac.New(sha256.New, key) }}}
}

// tag appends the tag of random to dst.
func (k sessionTokens) tag(dst, random []byte) []byte {
	mac := k.macs.Get().(hash.Hash)
	mac.Reset()
	mac.Write(random)
	var sum [sha256.Size]byte
	dst = append(dst, mac.Sum(sum[:0])[:sessionTagLen]...)
	k.macs.Put(mac)
	return dst
}

// new returns a new session token and the hash to store it under.
func (k sessionTokens) new() (token string, hash []byte) {
	var b [sessionRandomLen + sessionTagLen]byte
	rand.Read(b[:sessionRandomLen])
	// Appended in place, into the last sessionTagLen bytes of b.
	k.tag(b[sessionRandomLen:sessionRandomLen], b[:sessionRandomLen])
	token = base64.RawURLEncoding.EncodeToString(b[:])
	return token, hashToken(token)
}

// tokenShape is what a session cookie is before it is looked up.
type tokenShape int

const (
	tokenMadeUp tokenShape = iota // not made by this service: no session
	tokenTagged                   // made by this service
	tokenLegacy                   // of the shape of the tokens made before tags
)

// shape tells a token this service made from one it did not, without a
// query.
func (k sessionTokens) shape(token string) tokenShape {
	switch len(token) {
	case legacyTokenLen:
		if wellFormedToken(token) {
			return tokenLegacy
		}
	case sessionTokenLen:
		var buf [sessionRandomLen + sessionTagLen]byte
		var want [sessionTagLen]byte
		b, err := base64.RawURLEncoding.AppendDecode(buf[:0], []byte(token))
		if err == nil && len(b) == len(buf) && hmac.Equal(b[sessionRandomLen:], k.tag(want[:0], b[:sessionRandomLen])) {
			return tokenTagged
		}
	}
	return tokenMadeUp
}

// legacySessions knows whether any session whose token has no tag (made
// before tokens were tagged, or by a replica of an earlier version while a
// rolling upgrade lasts) may still be live: while one may, a token of
// their shape is looked up; once none is, it is refused without a query.
// The store is asked at most once a minute, by one request at a time (the
// others go by the last answer), and "live" stands until it first
// answers, so that no such session ends early. A session an earlier
// version makes after this replica learned that none was live signs in
// here from the next answer on, within a minute; a sign-out asks again
// once the answer is legacyRetryTime old, or waits for the answer being
// asked, so that it ends such a session rather than leave a copy of its
// cookie signed in.
type legacySessions struct {
	asking  sync.Mutex
	none    atomic.Bool
	askedAt atomic.Int64 // Unix nanoseconds of the last answer; 0: never
	// failedAt is when asking last failed (Unix nanoseconds; 0: never):
	// the last answer then stands for legacyRetryTime, for every caller.
	failedAt atomic.Int64
	// waiting, when set, runs as a sign-out begins to wait for the
	// answer being asked; tests use it to order a sign-out after a
	// recheck in flight.
	waiting func()
}

// legacyMayBeLive reports whether a token of the older shape is worth a
// query, by an answer at most fresh old.
func (s *Service) legacyMayBeLive(ctx context.Context, fresh time.Duration) bool {
	l := &s.legacySessions
	now := s.now()
	// A clock set back makes an answer or a failure lapse, rather than
	// stand until the clock passes its time again.
	within := func(at int64, d time.Duration) bool {
		since := now.Sub(time.Unix(0, at))
		return at != 0 && since >= 0 && since < d
	}
	answered := func() bool {
		return within(l.askedAt.Load(), fresh) || within(l.failedAt.Load(), legacyRetryTime)
	}
	if answered() {
		return !l.none.Load()
	}
	if !l.asking.TryLock() {
		if fresh >= legacyRecheckTime {
			return !l.none.Load()
		}
		// A sign-out waits for the answer being asked, begun at most
		// legacyAskTimeout before, rather than go by the last one, which
		// may be a minute old (a page's recheck in flight): it would
		// otherwise leave live a session an old replica made since.
		if l.waiting != nil {
			l.waiting()
		}
		l.asking.Lock()
		if now = s.now(); answered() {
			l.asking.Unlock()
			return !l.none.Load()
		}
	}
	defer l.asking.Unlock()
	// Not the request's to cancel: a client that hangs up would fail the
	// answer every request goes by.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), legacyAskTimeout)
	defer cancel()
	live, err := s.store.LegacySessionsLive(ctx, now)
	if err != nil {
		// The last answer stands for legacyRetryTime from the failure,
		// not from the ask, which may have waited its whole timeout, so
		// that a flood of such tokens while Postgres struggles is not one
		// query after another.
		l.failedAt.Store(s.now().UnixNano())
		s.log.WarnContext(ctx, "could not learn whether sessions of untagged tokens are live", "err", err)
		return !l.none.Load()
	}
	l.none.Store(!live)
	l.askedAt.Store(now.UnixNano())
	return live
}

// sessionTokenWorthAQuery reports whether token may name a session, by an
// answer about the older shape at most fresh old (legacySessions).
func (s *Service) sessionTokenWorthAQuery(ctx context.Context, token string, fresh time.Duration) bool {
	switch s.sessionTokens.shape(token) {
	case tokenTagged:
		return true
	case tokenLegacy:
		return s.legacyMayBeLive(ctx, fresh)
	}
	return false
}
