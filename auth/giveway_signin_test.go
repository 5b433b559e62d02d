package auth_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/auth/authtest"
)

// TestRejectedSignInGivesWay: a sign-in the limits reject, well-formed or
// malformed, is answered only once the password hash in flight is done,
// at once with none in flight, and after the bound, or when its request
// ends, with one that never finishes; always with the same 429.
func TestRejectedSignInGivesWay(t *testing.T) {
	hasher, err := auth.NewHasher(authtest.FastParams, 4, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	s := authtest.NewService(t, func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginIP, 1) },
		func(d *auth.Deps) { d.Hasher = hasher })
	attacker := client("192.0.2.1")
	signIn := func(ctx context.Context) error {
		_, err := s.Service.Login(ctx, auth.LoginRequest{Email: "nobody@example.com", Password: "guess", Client: attacker})
		return err
	}
	malformed := func(ctx context.Context) error { return s.Service.MalformedLogin(ctx, attacker) }
	if err := signIn(t.Context()); !errors.Is(err, auth.ErrInvalidCredentials) {
		t.Fatalf("first sign-in: %v, want a wrong password", err)
	}
	rejected := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, auth.ErrLimited) {
			t.Fatalf("%s: %v, want ErrLimited", what, err)
		}
	}
	// No hash in flight: answered at once (a wait would hang the test).
	rejected("no hash in flight", signIn(t.Context()))
	rejected("malformed, no hash in flight", malformed(t.Context()))

	// Another user's hash, held in flight until released.
	release := auth.HoldHashes(hasher)
	defer release()
	hashed := make(chan error, 1)
	go func() { _, err := hasher.Hash(context.Background(), "another user's password"); hashed <- err }()
	waitUntil(t, "a hash in flight", func() bool { return hasher.Stats().Running == 1 })

	for _, tc := range []struct {
		name string
		try  func(context.Context) error
	}{{"sign-in", signIn}, {"malformed sign-in", malformed}} {
		ctx, cancel := context.WithCancel(t.Context())
		answered := make(chan error, 1)
		go func() { answered <- tc.try(ctx) }()
		waitUntil(t, tc.name+" giving way", func() bool {
			select {
			case err := <-answered:
				t.Fatalf("%s answered (%v) with a hash in flight", tc.name, err)
			default:
			}
			return hasher.Stats().GivingWay == 1
		})
		cancel() // the request ends: answered, with the same answer
		rejected(tc.name+" whose request ended", <-answered)
	}
	// The hash never ends: the rejection is answered after the bound.
	rejected("hash held past the bound", signIn(t.Context()))

	// The hash ends: a rejection waiting for it is answered.
	answered := make(chan error, 1)
	go func() { answered <- signIn(t.Context()) }()
	waitUntil(t, "a sign-in giving way", func() bool { return hasher.Stats().GivingWay == 1 })
	release()
	if err := <-hashed; err != nil {
		t.Fatal(err)
	}
	rejected("after the hash", <-answered)
}

// waitUntil polls cond until it holds. The limit is only there so that a
// broken build fails the test instead of hanging it; nothing is asserted
// about time.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRejectedSignInGivesWayToSignIn: a rejection gives way to another
// user's sign-in from its admission to its answer, not only to its hash:
// here one whose hash is done and whose session is being written.
func TestRejectedSignInGivesWayToSignIn(t *testing.T) {
	hasher, err := auth.NewHasher(authtest.FastParams, 4, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	store := &hookedStore{Store: authtest.NewStore()}
	s := authtest.NewService(t, func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginIP, 1) },
		withStore(store), func(d *auth.Deps) { d.Hasher = hasher })
	if _, err := s.Service.CreateUser(t.Context(), "ann@example.com", "correct horse", false, "cli"); err != nil {
		t.Fatal(err)
	}
	attacker := client("192.0.2.1")
	signIn := func() error {
		_, err := s.Service.Login(t.Context(), auth.LoginRequest{Email: "nobody@example.com", Password: "guess", Client: attacker})
		return err
	}
	if err := signIn(); !errors.Is(err, auth.ErrInvalidCredentials) {
		t.Fatalf("first sign-in: %v, want a wrong password", err)
	}

	var writing atomic.Bool
	store.beforeCreateSession = func() { writing.Store(true); <-gate }
	signedIn := make(chan error, 1)
	go func() {
		_, err := s.Service.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "correct horse", Client: client("198.51.100.7")})
		signedIn <- err
	}()
	waitUntil(t, "ann's session being written", writing.Load)
	if n := hasher.Stats().Running; n != 0 {
		t.Fatalf("%d hashes running while the session is written", n)
	}
	answered := make(chan error, 1)
	go func() { answered <- signIn() }()
	waitUntil(t, "the rejection giving way", func() bool {
		select {
		case err := <-answered:
			t.Fatalf("answered (%v) with a sign-in in flight", err)
		default:
		}
		return hasher.Stats().GivingWay == 1
	})
	close(gate)
	if err := <-signedIn; err != nil {
		t.Fatalf("ann's sign-in: %v", err)
	}
	if err := <-answered; !errors.Is(err, auth.ErrLimited) {
		t.Fatalf("rejection: %v, want ErrLimited", err)
	}
}

// TestHashesGiveWayToReturningSignIn: a known device's sign-in, once
// admitted, holds the other hashes back until it is answered: here while
// its session is written, its own hash done.
func TestHashesGiveWayToReturningSignIn(t *testing.T) {
	hasher, other := giveWayHasher(t)
	store := &hookedStore{Store: authtest.NewStore()}
	s := authtest.NewService(t, nil, withStore(store), func(d *auth.Deps) { d.Hasher = hasher })
	_, ann := returningAnn(t, s.Service)

	gate := make(chan struct{})
	var writing atomic.Bool
	store.beforeCreateSession = func() { writing.Store(true); <-gate }
	signedIn := make(chan error, 1)
	go func() { _, err := s.Service.Login(t.Context(), ann); signedIn <- err }()
	waitUntil(t, "the returning sign-in's session being written", writing.Load)

	hashed := make(chan error, 1)
	go func() { _, _, err := hasher.Verify(context.Background(), other, "another password"); hashed <- err }()
	waitUntil(t, "a hash giving way", func() bool {
		select {
		case err := <-hashed:
			t.Fatalf("hashed (%v) beside a returning sign-in in flight", err)
		default:
		}
		return auth.GivingWayToReturning(hasher) == 1
	})
	close(gate)
	if err := <-signedIn; err != nil {
		t.Fatalf("returning sign-in: %v", err)
	}
	if err := <-hashed; err != nil {
		t.Fatal(err)
	}
}

// deviceLookupStore holds every known-device lookup until gate closes,
// once hold is set.
type deviceLookupStore struct {
	*authtest.Store
	hold    atomic.Bool
	looking atomic.Bool
	gate    chan struct{}
}

func (s *deviceLookupStore) KnownDevice(ctx context.Context, email string, nonceHash []byte, seenAfter time.Time) (bool, error) {
	if s.hold.Load() {
		s.looking.Store(true)
		<-s.gate
	}
	return s.Store.KnownDevice(ctx, email, nonceHash, seenAfter)
}

// TestGiveWayFromDeviceCookie: a sign-in with a valid device cookie is a
// check in flight from the cookie's check, before its limits are
// decided: while its device is looked up, rejections and the other
// hashes give way to it.
func TestGiveWayFromDeviceCookie(t *testing.T) {
	hasher, other := giveWayHasher(t)
	store := &deviceLookupStore{Store: authtest.NewStore(), gate: make(chan struct{})}
	s := authtest.NewService(t, func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginIP, 1) },
		withStore(store), func(d *auth.Deps) { d.Hasher = hasher })
	_, ann := returningAnn(t, s.Service)
	// The same browser from another address, the first one's quota spent.
	ann.Client = client("198.51.100.8")
	attacker := client("192.0.2.1")
	signIn := func() error {
		_, err := s.Service.Login(t.Context(), auth.LoginRequest{Email: "nobody@example.com", Password: "guess", Client: attacker})
		return err
	}
	if err := signIn(); !errors.Is(err, auth.ErrInvalidCredentials) {
		t.Fatalf("attacker's first sign-in: %v, want a wrong password", err)
	}

	store.hold.Store(true)
	signedIn := make(chan error, 1)
	go func() { _, err := s.Service.Login(t.Context(), ann); signedIn <- err }()
	waitUntil(t, "the returning browser's device being looked up", store.looking.Load)

	answered := make(chan error, 1)
	go func() { answered <- signIn() }()
	hashed := make(chan error, 1)
	go func() { _, _, err := hasher.Verify(context.Background(), other, "another password"); hashed <- err }()
	waitUntil(t, "a rejection and a hash giving way", func() bool {
		select {
		case err := <-answered:
			t.Fatalf("rejection answered (%v) while a returning browser's device was looked up", err)
		case err := <-hashed:
			t.Fatalf("hashed (%v) while a returning browser's device was looked up", err)
		default:
		}
		return hasher.Stats().GivingWay == 1 && auth.GivingWayToReturning(hasher) == 1
	})
	close(store.gate)
	if err := <-signedIn; err != nil {
		t.Fatalf("returning sign-in: %v", err)
	}
	if err := <-answered; !errors.Is(err, auth.ErrLimited) {
		t.Fatalf("rejection: %v, want ErrLimited", err)
	}
	if err := <-hashed; err != nil {
		t.Fatal(err)
	}
}

// giveWayHasher returns a fast hasher with room for four hashes at once,
// and a hash of "another password" it made, for a hash to run beside the
// sign-ins under test.
func giveWayHasher(t *testing.T) (*auth.Hasher, string) {
	t.Helper()
	hasher, err := auth.NewHasher(authtest.FastParams, 4, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	other, err := hasher.Hash(t.Context(), "another password")
	if err != nil {
		t.Fatal(err)
	}
	return hasher, other
}

// returningAnn creates ann@example.com on s and signs her in once from
// 198.51.100.7, returning her and the request of that browser again, its
// device cookie set: a returning browser's sign-in.
func returningAnn(t *testing.T, s *auth.Service) (auth.User, auth.LoginRequest) {
	t.Helper()
	user, err := s.CreateUser(t.Context(), "ann@example.com", "correct horse", false, "cli")
	if err != nil {
		t.Fatal(err)
	}
	ann := auth.LoginRequest{Email: "ann@example.com", Password: "correct horse", Client: client("198.51.100.7")}
	first, err := s.Login(t.Context(), ann)
	if err != nil {
		t.Fatal(err)
	}
	ann.DeviceCookie = first.Device.Value
	return user, ann
}

// forgetDevice forgets the device id of user's account in store, as its
// owner does from a session of theirs.
func forgetDevice(t *testing.T, store auth.Store, user auth.User, id string) {
	t.Helper()
	u, err := store.UserByEmail(t.Context(), user.Email)
	if err != nil {
		t.Fatal(err)
	}
	owner := []byte("the owner's session")
	now := time.Now()
	if _, err := store.SessionByHash(t.Context(), owner, now); err != nil {
		sess := auth.Session{UserID: u.ID, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
		if err := store.CreateSession(t.Context(), owner, sess, u.PasswordHash, u.SignOuts); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.ForgetDevice(t.Context(), u.ID, owner, id); err != nil {
		t.Fatal(err)
	}
}
