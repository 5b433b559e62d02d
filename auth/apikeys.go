package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/xcloak/xcloak/ratelimit"
)

// API keys let applications that keep their own users ask the decision API
// (decisions.go). A key is "xck_" and 256 random bits in unpadded base64url
// (43 characters): the prefix makes a leaked key recognisable to secret
// scanners and to people. Only its SHA-256 is stored; a key that cannot be
// guessed needs no slow hash.
//
// Checking a key costs no round trip: every replica keeps the hashes of the
// keys in force in memory and reloads them from Postgres when they are older
// than apiKeyRefresh, so a key revoked anywhere is refused everywhere within
// a second, and at once on the replica that revoked it. Failed checks (a
// missing, malformed, unknown or revoked key) count per client network under
// RuleAPIKeyIP; past its limit the network's failed checks are answered 429
// until the window passes. A valid key still passes from such a network:
// it costs nothing to recognise, and refusing it would let anyone who shares
// the application's address (or a process of the application still holding
// a revoked key) lock the application out.

// APIKeyPrefix starts every API key.
const APIKeyPrefix = "xck_"

// apiKeyRandomBytes is the entropy of a key.
const apiKeyRandomBytes = 32

// apiKeyLen is the length of a well-formed key.
var apiKeyLen = len(APIKeyPrefix) + base64.RawURLEncoding.EncodedLen(apiKeyRandomBytes)

// apiKeyRefresh bounds how long a replica trusts its list of keys.
const apiKeyRefresh = time.Second

// apiKeyOutage bounds how long a replica keeps deciding by its last list
// of keys while it cannot read a new one. No key can be revoked while
// Postgres is down, so the list goes stale only for a replica cut off from
// a Postgres that others still reach; a blip must not refuse every
// application's sign-ins at once.
const apiKeyOutage = time.Minute

// apiKeyTouchEvery bounds how often a key's last use is written.
const apiKeyTouchEvery = time.Minute

// MaxAPIKeyName is the longest name of an API key.
const MaxAPIKeyName = 64

// Errors of the API keys.
var (
	// ErrInvalidAPIKey: a missing, malformed, unknown or revoked key. The
	// four are alike by design.
	ErrInvalidAPIKey = errors.New("auth: invalid API key")
	// ErrAPIKeyExists: a key in force has that name already.
	ErrAPIKeyExists = errors.New("auth: an API key in force has that name")
	// ErrNoAPIKey: no key in force has that name.
	ErrNoAPIKey = errors.New("auth: no API key in force has that name")
	// ErrNoApp: no key, in force or revoked, speaks for that
	// application.
	ErrNoApp = errors.New("auth: no API key has been made for that application")
	// ErrAppInUse: a key of another name in force speaks for the
	// application a new key would take as its own by its name.
	ErrAppInUse = errors.New("auth: a key of another name in force speaks for that application")
	// ErrInvalidAPIKeyName: a name that is not 1 to 64 characters of
	// [A-Za-z0-9._-].
	ErrInvalidAPIKeyName = errors.New("auth: an API key name is 1 to 64 characters of A-Z, a-z, 0-9, '.', '_' and '-'")
)

// API key administration, recorded as security events without an account:
// Detail "app" is the key's application, "key" its name where that is
// another, "key_id" its ID (APIKey.ID, which tells the keys a name has had
// apart) and "by" who did it, as for the events of account
// administration. Never the key, nor its hash.
const (
	EventAPIKeyCreated = "api_key_created"
	EventAPIKeyRevoked = "api_key_revoked"
)

// APIKey is one application's key, as listed; never the key itself.
type APIKey struct {
	ID int64
	// Name names the key: the one in force under a name is revoked by it.
	Name string
	// App names the application the key speaks for, in events, on the
	// dashboard and in the namespace of its accounts: their limits,
	// lockouts and known devices are the application's, whichever of its
	// keys asks. It is Name unless the key was made for the application
	// of another (AddAPIKeyFor), as a key that replaces one is.
	App        string
	CreatedAt  time.Time
	RevokedAt  time.Time // zero while in force
	LastUsedAt time.Time // zero if never used (written at most once a minute)
	// Hash is the key's SHA-256; set only for the keys in force as
	// ActiveAPIKeys returns them.
	Hash []byte
}

// Revoked reports whether the key was revoked.
func (k APIKey) Revoked() bool { return !k.RevokedAt.IsZero() }

// AppStore keeps the API keys and the devices of the applications'
// accounts. Package postgres implements it.
type AppStore interface {
	// AddAPIKey stores a key in force, by the SHA-256 of the key, named
	// name, for the application app; ErrAPIKeyExists if a key in force
	// has that name. app "" is the application of that name, refused
	// (ErrAppInUse) while a key of another name in force speaks for it;
	// another app must be one a key, in force or revoked, was made for
	// (ErrNoApp), and app == name joins its keys in force.
	AddAPIKey(ctx context.Context, name, app string, hash []byte, at time.Time) (APIKey, error)
	// APIKeys lists every key, revoked ones included, oldest first.
	APIKeys(ctx context.Context) ([]APIKey, error)
	// RevokeAPIKey revokes the key in force named name and returns it,
	// revoked, without its hash; ErrNoAPIKey if there is none.
	RevokeAPIKey(ctx context.Context, name string, at time.Time) (APIKey, error)
	// ActiveAPIKeys lists the keys in force with their hashes.
	ActiveAPIKeys(ctx context.Context) ([]APIKey, error)
	// TouchAPIKeys sets the last use of the keys ids to at.
	TouchAPIKeys(ctx context.Context, ids []int64, at time.Time) error

	// KnownAppDevice reports whether hash is a known device (the HMAC of
	// an application, an account and a device id) last seen after
	// seenAfter.
	KnownAppDevice(ctx context.Context, hash []byte, seenAfter time.Time) (bool, error)
	// AddAppDevice makes hash a known device of app's account account (the
	// HMAC of the application and the account as sent), whose folded
	// account is folded (the same HMAC of it), seen at, and forgets that
	// account's least recently used devices beyond max; it reports whether
	// hash was not known before. A sign-in decided at or before the folded
	// account's last reset (ForgetAppDevices) adds nothing: it is
	// ErrResetSince.
	AddAppDevice(ctx context.Context, app string, account, folded, hash []byte, decided, at time.Time, max int) (added bool, err error)
	// ForgetAppDevices forgets every device of every account whose folded
	// account is folded (the HMAC of an application and an account
	// folded), reset at at, and reports how many there were.
	ForgetAppDevices(ctx context.Context, folded []byte, at time.Time) (int, error)
	// ForgetNewAppDevices forgets every application's devices first seen
	// at or after since (attack mode's start, SignOutNewDevices) and
	// returns how many.
	ForgetNewAppDevices(ctx context.Context, since time.Time) (int, error)
}

// ErrResetSince is AddAppDevice's answer for a sign-in decided at or
// before its account's last reset.
var ErrResetSince = errors.New("the account was reset after the sign-in was decided")

// errNoAppStore: the service was made without Deps.Apps.
var errNoAppStore = errors.New("no store of API keys")

// CheckAPIKeyName reports whether name can name an API key.
func CheckAPIKeyName(name string) error {
	if name == "" || len(name) > MaxAPIKeyName {
		return ErrInvalidAPIKeyName
	}
	for _, c := range []byte(name) {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '.' && c != '_' && c != '-' {
			return ErrInvalidAPIKeyName
		}
	}
	return nil
}

// AddAPIKey makes a new key named name, for the application of that name,
// and returns it: the only time it is seen, since only its hash is kept.
// A name whose keys were all revoked takes the application's history; one
// that a key of another name in force speaks for (after a rotation, shop
// while shop-2 replaces it) is refused, ErrAppInUse, rather than joined
// unasked: AddAPIKeyFor joins it. It is recorded as an EventAPIKeyCreated
// by by ("cli", "admin:<email>"); a refused one records nothing. Errors:
// ErrInvalidAPIKeyName, ErrAPIKeyExists, ErrAppInUse, ErrUnavailable.
func (s *Service) AddAPIKey(ctx context.Context, name, by string) (key string, info APIKey, err error) {
	return s.addAPIKey(ctx, name, "", by)
}

// AddAPIKeyFor makes a new key named name for the application app, which
// a key, in force or revoked, already speaks for, as AddAPIKey does: the
// way to replace a key without a pause, the new one deployed while the
// old one still works, then the old one revoked, the application's
// accounts keeping their limits, lockouts and known devices throughout.
// Errors: those of AddAPIKey, and ErrNoApp.
func (s *Service) AddAPIKeyFor(ctx context.Context, name, app, by string) (key string, info APIKey, err error) {
	if err := CheckAPIKeyName(app); err != nil {
		return "", APIKey{}, err
	}
	return s.addAPIKey(ctx, name, app, by)
}

// addAPIKey is AddAPIKey for app "", AddAPIKeyFor for another.
func (s *Service) addAPIKey(ctx context.Context, name, app, by string) (key string, info APIKey, err error) {
	if err := CheckAPIKeyName(name); err != nil {
		return "", APIKey{}, err
	}
	if s.apps == nil {
		return "", APIKey{}, unavailable("adding API key", errNoAppStore)
	}
	var b [apiKeyRandomBytes]byte
	rand.Read(b[:])
	key = APIKeyPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	ctx, cancel := s.afterDecision(ctx) // finished and recorded whether or not its caller waits
	defer cancel()
	info, err = s.apps.AddAPIKey(ctx, name, app, apiKeyHash(key), s.now())
	if errors.Is(err, ErrAPIKeyExists) || errors.Is(err, ErrNoApp) || errors.Is(err, ErrAppInUse) {
		return "", APIKey{}, err
	}
	if err != nil {
		return "", APIKey{}, s.dbDown("adding API key", err)
	}
	s.apiKeys.expire()
	s.recordAPIKey(EventAPIKeyCreated, info, by)
	return key, info, nil
}

// ListAPIKeys lists every key, revoked ones included, oldest first.
func (s *Service) ListAPIKeys(ctx context.Context) ([]APIKey, error) {
	if s.apps == nil {
		return nil, unavailable("listing API keys", errNoAppStore)
	}
	keys, err := s.apps.APIKeys(ctx)
	if err != nil {
		return nil, s.dbDown("listing API keys", err)
	}
	return keys, nil
}

// RevokeAPIKey revokes the key in force named name: refused at once by this
// replica, within apiKeyRefresh by the others. It is recorded as an
// EventAPIKeyRevoked by by; revoking no key records nothing. Errors:
// ErrNoAPIKey, ErrUnavailable.
func (s *Service) RevokeAPIKey(ctx context.Context, name, by string) error {
	if s.apps == nil {
		return unavailable("revoking API key", errNoAppStore)
	}
	ctx, cancel := s.afterDecision(ctx) // finished and recorded whether or not its caller waits
	defer cancel()
	k, err := s.apps.RevokeAPIKey(ctx, name, s.now())
	if errors.Is(err, ErrNoAPIKey) {
		return err
	}
	if err != nil {
		return s.dbDown("revoking API key", err)
	}
	s.apiKeys.expire()
	s.recordAPIKey(EventAPIKeyRevoked, k, by)
	return nil
}

// recordAPIKey records an event of kind about key k, by by: its name and
// ID, which are no secret, never the key or its hash.
func (s *Service) recordAPIKey(kind string, k APIKey, by string) {
	detail := map[string]string{"app": k.App, "key_id": strconv.FormatInt(k.ID, 10), "by": by}
	if k.Name != k.App {
		detail["key"] = k.Name
	}
	s.record(Event{Kind: kind, Detail: detail})
}

// CheckAPIKey returns the key in force that key is, for a request from
// client. Errors: ErrInvalidAPIKey; *LimitedError once the client's network
// has failed RuleAPIKeyIP's count of checks; ErrUnavailable.
func (s *Service) CheckAPIKey(ctx context.Context, client Client, key string) (APIKey, error) {
	if len(key) == apiKeyLen && strings.HasPrefix(key, APIKeyPrefix) {
		k, ok, err := s.activeAPIKey(ctx, apiKeyHash(key))
		if err != nil {
			return APIKey{}, err
		}
		if ok {
			return k, nil
		}
	}
	return APIKey{}, s.failedAPIKey(ctx, client)
}

// failedAPIKey counts a failed key check towards the lock of the client's
// network, and says whether it is locked. A locked network's failures are
// refused by a decision that the limits remember in process, so a flood of
// keys from it costs no round trip per key.
func (s *Service) failedAPIKey(ctx context.Context, client Client) error {
	network, _ := KeyNetwork(32, 64).ID(Subject{Client: client})
	// Lock-only: the lock is the whole verdict, and no log is kept.
	d, err := s.decide(ctx, ratelimit.Rule{Name: RuleAPIKeyIP, ID: network, Lockable: true})
	if err != nil {
		return unavailable("checking API key failures", err)
	}
	if !d.Allowed {
		return &LimitedError{RetryAfter: d.RetryAfter}
	}
	f, err := s.limits.Fail(ctx, RuleAPIKeyIP, network, "")
	if err != nil {
		return unavailable("counting API key failure", err)
	}
	// Locked by this failure, or by another since the decision above: a
	// failure while locked is not counted, and is refused all the same.
	if f.LockedNow || f.LockedFor > 0 {
		return &LimitedError{RetryAfter: f.LockedFor}
	}
	return ErrInvalidAPIKey
}

func apiKeyHash(key string) []byte {
	sum := sha256.Sum256([]byte(key))
	return sum[:]
}

// activeAPIKey looks hash up among the keys in force, reloading them when
// the replica's list is older than apiKeyRefresh.
func (s *Service) activeAPIKey(ctx context.Context, hash []byte) (APIKey, bool, error) {
	if s.apps == nil {
		return APIKey{}, false, unavailable("checking API key", errNoAppStore)
	}
	return s.apiKeys.lookup(ctx, s, [sha256.Size]byte(hash))
}

// apiKeyCache is a replica's list of the keys in force.
type apiKeyCache struct {
	mu       sync.Mutex
	loadedAt time.Time // zero: load before use
	// failedAt is when the last reload failed (zero since one succeeded):
	// reloads are tried at most once per apiKeyRefresh while they fail.
	failedAt time.Time
	// reloading is closed when the reload under way ends; nil when none
	// is.
	reloading chan struct{}
	// changes counts expire's calls, so that a reload that began before
	// a change on this replica does not pass for one made after it.
	changes uint64
	byHash  map[[sha256.Size]byte]APIKey
	// touched is when this replica last wrote each key's last use, by id.
	touched map[int64]time.Time
}

// apiKeyReloadTimeout bounds one reload of the keys.
const apiKeyReloadTimeout = 5 * time.Second

// expire makes the next lookup reload the keys: after a change on this
// replica.
func (c *apiKeyCache) expire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loadedAt, c.failedAt = time.Time{}, time.Time{}
	c.changes++
}

// apiKeyRereads bounds the reads of one reload that changes on this
// replica make it read again.
const apiKeyRereads = 5

// lookup returns the key in force with hash. Lookups wait for a reload
// rather than answer from a list older than apiKeyRefresh: that bound is
// what makes revocation take effect within it. The first lookup to find
// the list old starts a reload of the replica's, on no request's behalf,
// so that a client that hangs up fails no reload; every lookup waits
// for it as long as its own request lasts. While reloads fail, the last
// list answers for up to apiKeyOutage, and a reload is tried once per
// apiKeyRefresh.
func (c *apiKeyCache) lookup(ctx context.Context, s *Service, hash [sha256.Size]byte) (APIKey, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := s.now(); older(now, c.loadedAt, apiKeyRefresh) && older(now, c.failedAt, apiKeyRefresh) {
		if c.reloading == nil {
			c.reloading = make(chan struct{})
			go c.reload(s, c.reloading)
		}
		wait := c.reloading
		c.mu.Unlock()
		select {
		case <-wait:
			c.mu.Lock()
		case <-ctx.Done():
			c.mu.Lock()
			return APIKey{}, false, unavailable("checking API key", ctx.Err())
		}
	}
	now := s.now()
	if older(now, c.loadedAt, apiKeyOutage) {
		return APIKey{}, false, unavailable("checking API key", errAPIKeysStale)
	}
	k, ok := c.byHash[hash]
	if ok && now.Sub(c.touched[k.ID]) >= apiKeyTouchEvery {
		if c.touched == nil {
			c.touched = map[int64]time.Time{}
		}
		c.touched[k.ID] = now
		// Off the request's path: a key's last use is for the list of
		// keys, never worth a request's time or its failure.
		go s.touchAPIKey(k.ID, now)
	}
	return k, ok, nil
}

// older reports whether t is unset, at least d before now, or after now
// (a clock set back).
func older(now, t time.Time, d time.Duration) bool {
	return t.IsZero() || now.Sub(t) >= d || now.Before(t)
}

// errAPIKeysStale: the replica's list of keys is too old to decide by,
// and reloading it fails.
var errAPIKeysStale = errors.New("the list of API keys could not be reloaded")

// touchAPIKey writes that key id was used at.
func (s *Service) touchAPIKey(id int64, at time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.apps.TouchAPIKeys(ctx, []int64{id}, at); err != nil {
		s.log.Warn("noting API key use", "err", err)
	}
}

// reload reads the keys in force and closes done. A read that began
// before a change on this replica (expire) may have missed it, so it
// reads again until one began after the last.
func (c *apiKeyCache) reload(s *Service, done chan struct{}) {
	defer close(done)
	for range apiKeyRereads {
		c.mu.Lock()
		changes := c.changes
		c.mu.Unlock()
		started := s.now()
		ctx, cancel := context.WithTimeout(context.Background(), apiKeyReloadTimeout)
		byHash, err := readAPIKeys(ctx, s)
		cancel()
		c.mu.Lock()
		if err != nil {
			c.reloading, c.failedAt = nil, s.now()
			c.mu.Unlock()
			s.log.Warn("API keys not reloaded; deciding by the last list while it is under a minute old", "err", err)
			return
		}
		if c.changes == changes {
			c.reloading = nil
			c.byHash, c.loadedAt, c.failedAt = byHash, started, time.Time{}
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
	}
	// Changed faster than read: the lookups waiting find no list, and the
	// next reload is tried in a second.
	c.mu.Lock()
	c.reloading, c.failedAt = nil, s.now()
	c.mu.Unlock()
}

// readAPIKeys reads the keys in force, by hash.
func readAPIKeys(ctx context.Context, s *Service) (map[[sha256.Size]byte]APIKey, error) {
	keys, err := s.apps.ActiveAPIKeys(ctx)
	if err != nil {
		return nil, s.dbDown("reading API keys", err)
	}
	byHash := make(map[[sha256.Size]byte]APIKey, len(keys))
	for _, k := range keys {
		if len(k.Hash) != sha256.Size {
			return nil, s.dbDown("reading API keys", fmt.Errorf("key %q has a hash of %d bytes", k.Name, len(k.Hash)))
		}
		byHash[[sha256.Size]byte(k.Hash)] = k
	}
	return byHash, nil
}
